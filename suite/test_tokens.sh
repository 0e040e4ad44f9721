#!/usr/bin/env bash
# test_tokens.sh — `plateau tokens IN OUT`: the shard of a text file has the
# 24-byte header (magic PLTOKENS, version 1, width 2, the count) and one
# uint16 token per input byte, in order; an empty file gives 0 tokens; usage
# errors exit 2, an unreadable input or unwritable output exits 3 and leaves
# no output file; --help exits 0.
# Usage: BUILD=build bash suite/test_tokens.sh
set -uo pipefail
PL_TEST=test_tokens.sh
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

printf 'Hello, plateau!\nbytes \xc3\xa9\xff\x00 and more\n' >"$tmp/in.txt"
n=$(stat -c %s "$tmp/in.txt")
if out=$("$BIN" tokens "$tmp/in.txt" "$tmp/out.tok" 2>&1); then pass; else fail "tokens exited $?: $out"; fi
[[ $out == *"$n tokens"* ]] && pass || fail "message '$out' does not give $n tokens"
size=$(stat -c %s "$tmp/out.tok")
[[ $size -eq $((24 + 2 * n)) ]] && pass || fail "size $size, want $((24 + 2 * n))"
[[ $(head -c 8 "$tmp/out.tok") == PLTOKENS ]] && pass || fail "magic"
read -r ver width < <(od -An -tu4 -j8 -N8 "$tmp/out.tok")
[[ $ver == 1 && $width == 2 ]] && pass || fail "version $ver width $width"
count=$(od -An -tu8 -j16 -N8 "$tmp/out.tok" | tr -d ' ')
[[ $count == "$n" ]] && pass || fail "count $count, want $n"
want=$(od -An -v -tu1 "$tmp/in.txt" | tr -s ' \n' '\n' | sed '/^$/d')
got=$(od -An -v -tu2 -j24 "$tmp/out.tok" | tr -s ' \n' '\n' | sed '/^$/d')
[[ $want == "$got" ]] && pass || fail "tokens differ from the input bytes"

: >"$tmp/empty.txt"
"$BIN" tokens "$tmp/empty.txt" "$tmp/empty.tok" >/dev/null 2>&1 && pass || fail "empty input"
[[ $(stat -c %s "$tmp/empty.tok") -eq 24 ]] && pass || fail "empty shard is not a bare header"

expect_rc() {
  local rc=$1
  shift
  "$@" >/dev/null 2>&1
  local got=$?
  [[ $got -eq $rc ]] && pass || fail "$* -> exit $got (want $rc)"
}
expect_rc 2 "$BIN" tokens
expect_rc 2 "$BIN" tokens "$tmp/in.txt"
expect_rc 2 "$BIN" tokens "$tmp/in.txt" "$tmp/a" "$tmp/b"
expect_rc 0 "$BIN" tokens --help
expect_rc 3 "$BIN" tokens "$tmp/missing.txt" "$tmp/x.tok"
[[ ! -e $tmp/x.tok ]] && pass || fail "a failed run left its output"
expect_rc 3 "$BIN" tokens "$tmp/in.txt" "$tmp/no/such/dir/x.tok"

echo "$PL_TEST: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
