# series.gp — the colours and markers the charts draw their series with,
# loaded by the figure scripts (not a figure itself):
#   dir = ""; do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq "/") { dir = ARG0[1:i] } }
#   load dir."series.gp"
# Series i (1-based) gets colour pl_lc(i) and marker pl_pt(i) (filled) or
# pl_pt_open(i) (the same shape, open: the paper's figures).  Colour and
# shape both step with i, 9 colours against 5 shapes: no two of the first 45
# series share a (colour, shape) pair, and neighbours differ in both.  The
# colours are the Okabe–Ito set (told apart with the common colour-vision
# deficiencies) less its yellow, which does not show on white, plus a brown
# and a wine; the first five far apart (a chart of five series has no two
# alike), all dark enough for a thin dashed line.
pl_colors = "#0072b2 #d55e00 #009e73 #cc79a7 #000000 #e69f00 #56b4e9 #8c564b #882255"
pl_lc(i) = word(pl_colors, int(i - 1) % 9 + 1)
# filled circle, square, triangle, inverted triangle, diamond; open = one less
pl_shape(k) = k == 0 ? 7 : k == 1 ? 5 : k == 2 ? 9 : k == 3 ? 11 : 13
pl_pt(i) = pl_shape(int(i - 1) % 5)
pl_pt_open(i) = pl_pt(i) - 1
# the index of word s in the blank-separated list l (0: not there)
pl_index(l, s) = sum [k = 1:words(l)] (word(l, k) eq s ? k : 0)
pl_in(l, s) = pl_index(l, s) > 0
