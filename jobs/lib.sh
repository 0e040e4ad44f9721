# jobs/lib.sh — what jobs/submit, jobs/run, jobs/status and the sbatch
# templates share (sourced, never run): the sweep file reader, the argument
# splitter, the launchers (srun under Slurm, mpirun without), a point's run
# with its log and state, and the build and resume checks.  Everything runs
# from the repository root (jobs/submit submits from there; the templates
# cd to $SLURM_SUBMIT_DIR).
#
# A sweep file (TSV): '#' lines and blank lines are comments, except the
# directives "# machine: KIND" (the machine kind its sizes are for, e.g.
# h200x2, cpu) and "# requires: bench NAME [OPTIONS]" (a bench, or a bench
# with options, that a build may lack: checked with `plateau bench NAME
# --columns`, or `--dry-run OPTIONS` when options are given; repeatable);
# the first other line is the header naming the columns, in any order:
#   point          id, [A-Za-z0-9][A-Za-z0-9._-]*, at most 128 characters,
#                  unique in the file (required)
#   bench          a `plateau bench` name, or peer:NAME for analysis/peers/NAME.py
#                  ($PL_PEERS_DIR/NAME.py when set) (required)
#   ntasks         ranks of the point, in all (required)
#   nodes          nodes (default 1)
#   gpus_per_node  GPUs per node to allocate (default 0: none; then with launch
#                  mpi, one task per GPU: ntasks = nodes x gpus_per_node)
#   time           Slurm time limit of the point, [D-]HH:MM:SS or MINUTES, more
#                  than zero (default 00:30:00)
#   launch         mpi: ntasks processes through srun / mpirun (default);
#                  single: one process, "{launch}" in args becoming the
#                  launcher of ntasks ranks (maxbatch's trials);
#                  ranks: ntasks processes of a peer script (no MPI), "{rank}"
#                  in args becoming each one's index (per-process peers)
#   machine        machine kinds the point is for, comma-separated (default *)
#   args           the bench's options, split like a shell's words: '...' and
#                  "..." quote, \ escapes; nothing is expanded ($, `, * are
#                  literal).  Placeholders: {launch}, {ntasks}, {rank}, {out}
#                  (the run directory).
# shellcheck shell=bash

PL_BIN=${BUILD:-build}/bin/plateau

# ---- the build -----------------------------------------------------------------
# pl_stale_sources: print the source files (engine/ suite/ baselines/; *.c,
# *.cu, *.h, *.def, not test_*) newer than the plateau binary.  A header or
# .def that no object of the program includes (a test's header), by the
# build's dependency files, is not one of them.
pl_stale_sources() {
  local d dirs=() f deps=()
  for d in engine suite baselines; do [[ -d $d ]] && dirs+=("$d"); done
  [[ ${#dirs[@]} -gt 0 ]] || return 0
  local objdir=${PL_BIN%/bin/plateau}/obj
  [[ -d $objdir ]] && mapfile -t deps < <(find "$objdir" -name '*.d' ! -name 'test_*' 2>/dev/null)
  while IFS= read -r f; do
    if [[ ${#deps[@]} -gt 0 && ($f == *.h || $f == *.def) ]] && ! grep -qF -- "$f" "${deps[@]}" 2>/dev/null; then
      continue
    fi
    echo "$f"
  done < <(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.def' \) \
    ! -name 'test_*' -newer "$PL_BIN" 2>/dev/null || true)
}

# pl_require_fresh_build: refuse (exit 2) when the binary is missing or older
# than a source file.  A job never builds: on a cluster the compute node may
# lack the compilers, and concurrent array tasks would race on build/.  When
# `make -q` (make's own dependency graph) says the binary is up to date, a
# newer file that it does not depend on is not a reason to refuse.
pl_require_fresh_build() {
  if [[ ! -x $PL_BIN ]]; then
    echo "plateau job: $PL_BIN is missing in $PWD: run 'make' there (on a login node) and resubmit" >&2
    exit 2
  fi
  local newer
  newer=$(pl_stale_sources | head -n 5 || true)
  [[ -z $newer ]] && return 0
  if [[ -f Makefile ]] && command -v make >/dev/null && make -s -q BUILD="${BUILD:-build}" "$PL_BIN" >/dev/null 2>&1; then
    return 0
  fi
  echo "plateau job: $PL_BIN is older than its sources (a stale build); run 'make' and resubmit. Newer:" >&2
  echo "$newer" | sed 's/^/  /' >&2
  exit 2
}

# ---- words -----------------------------------------------------------------------
# pl_split_args STRING: split into the array PL_ARGV like a shell's words
# ('...' literal, "..." with \" \\ \$ \` escapes, \ outside quotes escaping the
# next character), expanding nothing.  Returns 1 with PL_ERR set on an
# unbalanced quote or a trailing backslash.
pl_split_args() {
  local s=$1 n=${#1} i=0 c q= word= inword=0
  PL_ARGV=()
  PL_ERR=
  while ((i < n)); do
    c=${s:i:1}
    if [[ -n $q ]]; then
      if [[ $c == "$q" ]]; then
        q=
      elif [[ $q == '"' && $c == '\' ]] && ((i + 1 < n)) && [[ ${s:i+1:1} == [\"\\\$\`] ]]; then
        word+=${s:i+1:1}
        i=$((i + 1))
      else
        word+=$c
      fi
    else
      case $c in
        ' ' | $'\t')
          if ((inword)); then PL_ARGV+=("$word"); word= inword=0; fi ;;
        "'" | '"') q=$c inword=1 ;;
        '\')
          if ((i + 1 >= n)); then PL_ERR="a trailing backslash"; return 1; fi
          word+=${s:i+1:1} inword=1
          i=$((i + 1)) ;;
        *) word+=$c inword=1 ;;
      esac
    fi
    i=$((i + 1))
  done
  if [[ -n $q ]]; then PL_ERR="an unbalanced $q quote"; return 1; fi
  ((inword)) && PL_ARGV+=("$word")
  return 0
}

# pl_subst WORD KEY VALUE...: WORD with each {KEY} replaced by VALUE (into PL_WORD)
pl_subst() {
  PL_WORD=$1
  shift
  while [[ $# -ge 2 ]]; do
    PL_WORD=${PL_WORD//\{$1\}/$2}
    shift 2
  done
}

# pl_quote WORD...: the words as one shell-safe line
pl_quote() { printf '%q ' "$@" | sed 's/ $//'; }

# ---- the sweep file -----------------------------------------------------------------
PL_COLUMNS="point bench ntasks nodes gpus_per_node time launch machine args"
# The longest point id: a point's files are named after it (logs/ID.log,
# .state, .lock), and a file name has at most 255 bytes on the usual file
# systems; the margin leaves room for suffixes and temporary names.
PL_ID_MAX=128

# pl_sweep_read FILE: parse a sweep file (format above) into the arrays
#   PL_P_ID PL_P_BENCH PL_P_NTASKS PL_P_NODES PL_P_GPN PL_P_TIME PL_P_LAUNCH
#   PL_P_MACHINE PL_P_ARGS PL_P_LINE
# and PL_SWEEP_MACHINE, PL_SWEEP_REQ (one "NAME [OPTIONS]" per requires
# line), PL_SWEEP_TITLE (the first comment line).  Returns 1 with PL_ERR
# ("FILE:LINE: what") on the first error.
pl_sweep_read() {
  local file=$1 line lineno=0 have_header=0 i f rest
  local -A col=() seen=()
  PL_P_ID=() PL_P_BENCH=() PL_P_NTASKS=() PL_P_NODES=() PL_P_GPN=() PL_P_TIME=()
  PL_P_LAUNCH=() PL_P_MACHINE=() PL_P_ARGS=() PL_P_LINE=()
  PL_SWEEP_MACHINE= PL_SWEEP_TITLE= PL_ERR=
  PL_SWEEP_REQ=()
  [[ -r $file ]] || { PL_ERR="$file: cannot read"; return 1; }
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    line=${line%$'\r'}
    if [[ $line == \#* ]]; then
      if [[ $line =~ ^#[[:space:]]*machine:[[:space:]]*([^[:space:]]+) ]]; then
        PL_SWEEP_MACHINE=${BASH_REMATCH[1]}
      elif [[ $line =~ ^#[[:space:]]*requires:[[:space:]]*bench[[:space:]]+(.*)$ ]]; then
        PL_SWEEP_REQ+=("${BASH_REMATCH[1]}")
      elif [[ -z $PL_SWEEP_TITLE && $have_header == 0 ]]; then
        PL_SWEEP_TITLE=$(sed 's/^#[[:space:]]*//' <<<"$line")
      fi
      continue
    fi
    [[ -z ${line//[[:space:]]/} ]] && continue
    f=() rest=$line # split on every tab (read -a would merge empty fields)
    while :; do
      f+=("${rest%%$'\t'*}")
      [[ $rest == *$'\t'* ]] || break
      rest=${rest#*$'\t'}
    done
    if [[ $have_header == 0 ]]; then
      for i in "${!f[@]}"; do
        [[ " $PL_COLUMNS " == *" ${f[$i]} "* ]] ||
          { PL_ERR="$file:$lineno: unknown column '${f[$i]}' in the header (allowed: $PL_COLUMNS)"; return 1; }
        [[ -z ${col[${f[$i]}]:-} ]] || { PL_ERR="$file:$lineno: column '${f[$i]}' twice"; return 1; }
        col[${f[$i]}]=$i
      done
      [[ -n ${col[point]:-} && -n ${col[bench]:-} && -n ${col[ntasks]:-} ]] ||
        { PL_ERR="$file:$lineno: the header must name the columns point, bench and ntasks (tab-separated), got: $line"; return 1; }
      have_header=1
      continue
    fi
    ((${#f[@]} <= ${#col[@]})) ||
      { PL_ERR="$file:$lineno: ${#f[@]} fields but ${#col[@]} columns (a tab inside args?)"; return 1; }
    local p=${f[${col[point]}]:-} b=${f[${col[bench]}]:-} n=${f[${col[ntasks]}]:-}
    local nodes=1 gpn=0 tl=00:30:00 launch=mpi mach='*' args=
    [[ -n ${col[nodes]:-} && -n ${f[${col[nodes]}]:-} ]] && nodes=${f[${col[nodes]}]}
    [[ -n ${col[gpus_per_node]:-} && -n ${f[${col[gpus_per_node]}]:-} ]] && gpn=${f[${col[gpus_per_node]}]}
    [[ -n ${col[time]:-} && -n ${f[${col[time]}]:-} ]] && tl=${f[${col[time]}]}
    [[ -n ${col[launch]:-} && -n ${f[${col[launch]}]:-} ]] && launch=${f[${col[launch]}]}
    [[ -n ${col[machine]:-} && -n ${f[${col[machine]}]:-} ]] && mach=${f[${col[machine]}]}
    [[ -n ${col[args]:-} ]] && args=${f[${col[args]}]:-}
    local at="$file:$lineno: point '$p'"
    [[ $p =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { PL_ERR="$file:$lineno: point id '$p' is not allowed (letters, digits, . _ -)"; return 1; }
    ((${#p} <= PL_ID_MAX)) ||
      { PL_ERR="$file:$lineno: point id '${p:0:40}...' is ${#p} characters long (allowed: at most $PL_ID_MAX)"; return 1; }
    [[ -z ${seen[$p]:-} ]] || { PL_ERR="$at repeats line ${seen[$p]}"; return 1; }
    [[ $b =~ ^(peer:)?[a-z0-9_]+$ ]] || { PL_ERR="$at: bench '$b' is not a bench name (or peer:NAME)"; return 1; }
    [[ $n =~ ^[1-9][0-9]*$ ]] || { PL_ERR="$at: ntasks '$n' must be a positive integer"; return 1; }
    [[ $nodes =~ ^[1-9][0-9]*$ ]] || { PL_ERR="$at: nodes '$nodes' must be a positive integer"; return 1; }
    [[ $gpn =~ ^[0-9]+$ ]] || { PL_ERR="$at: gpus_per_node '$gpn' must be an integer >= 0"; return 1; }
    pl_time_check "$tl" || { PL_ERR="$at: time '$tl' $PL_ERR"; return 1; }
    [[ $launch =~ ^(mpi|single|ranks)$ ]] || { PL_ERR="$at: launch '$launch' must be mpi, single or ranks"; return 1; }
    [[ $mach =~ ^[A-Za-z0-9*][A-Za-z0-9_.*,-]*$ ]] || { PL_ERR="$at: machine '$mach' must be kinds separated by commas, or *"; return 1; }
    if ((nodes > n)); then PL_ERR="$at: $nodes nodes for $n tasks"; return 1; fi
    if ((n % nodes != 0)); then PL_ERR="$at: ntasks $n is not a multiple of nodes $nodes (equal tasks per node)"; return 1; fi
    if [[ $launch == mpi ]] && ((gpn > 0 && n != nodes * gpn)); then
      PL_ERR="$at: one task per GPU: ntasks $n must equal nodes $nodes x gpus_per_node $gpn"; return 1
    fi
    if [[ $b == peer:* && $launch == mpi ]]; then
      PL_ERR="$at: a peer is no MPI program: launch single or ranks"; return 1
    fi
    if [[ $b != peer:* && $launch == ranks ]]; then
      # plateau is an MPI program: under srun its processes would form one world
      PL_ERR="$at: launch ranks starts a peer script per rank; a plateau bench runs with mpi (or single)"; return 1
    fi
    pl_split_args "$args" || { PL_ERR="$at: args: $PL_ERR"; return 1; }
    seen[$p]=$lineno
    PL_P_ID+=("$p") PL_P_BENCH+=("$b") PL_P_NTASKS+=("$n") PL_P_NODES+=("$nodes")
    PL_P_GPN+=("$gpn") PL_P_TIME+=("$tl") PL_P_LAUNCH+=("$launch") PL_P_MACHINE+=("$mach")
    PL_P_ARGS+=("$args") PL_P_LINE+=("$lineno")
  done <"$file"
  [[ $have_header == 1 && ${#PL_P_ID[@]} -gt 0 ]] ||
    { PL_ERR="$file has no points (a header line, then one point per line)"; return 1; }
  return 0
}

# pl_time_check TIME: a point's time limit is [D-]HH:MM:SS (minutes and
# seconds below 60, hours below 24 after days) or MINUTES, and more than zero
# (Slurm reads 0 as no limit at all); 1 with PL_ERR (what is wrong, what is
# allowed) otherwise.
pl_time_check() {
  local t=$1 d=0 h=0 m=0 sec=0 allowed="(allowed: [D-]HH:MM:SS or MINUTES, more than zero)"
  if [[ $t =~ ^([0-9]{1,4}-)?([0-9]{1,2}):([0-9]{2}):([0-9]{2})$ ]]; then
    [[ -n ${BASH_REMATCH[1]} ]] && d=$((10#${BASH_REMATCH[1]%-}))
    h=$((10#${BASH_REMATCH[2]})) m=$((10#${BASH_REMATCH[3]})) sec=$((10#${BASH_REMATCH[4]}))
    if ((m > 59 || sec > 59)); then PL_ERR="has minutes or seconds above 59 $allowed"; return 1; fi
    if [[ -n ${BASH_REMATCH[1]} ]] && ((h > 23)); then PL_ERR="has hours above 23 after days $allowed"; return 1; fi
  elif [[ $t =~ ^[0-9]{1,7}$ ]]; then
    m=$((10#$t))
  else
    PL_ERR="is not a time $allowed"
    return 1
  fi
  if ((d + h + m + sec == 0)); then PL_ERR="is zero, which Slurm takes for no limit $allowed"; return 1; fi
  return 0
}

# pl_sweep_requires: check the sweep's "# requires:" lines against this
# build; returns 1 with PL_ERR naming the first one it lacks.
pl_sweep_requires() {
  local req name
  for req in "${PL_SWEEP_REQ[@]}"; do
    pl_split_args "$req" || { PL_ERR="requires: $req: $PL_ERR"; return 1; }
    name=${PL_ARGV[0]:-}
    if [[ ${#PL_ARGV[@]} -le 1 ]]; then
      "$PL_BIN" bench "$name" --columns >/dev/null 2>&1 && continue
    else
      "$PL_BIN" bench "${PL_ARGV[@]}" --dry-run >/dev/null 2>&1 && continue
    fi
    PL_ERR="this sweep needs 'plateau bench $req', which this build ($PL_BIN) does not have"
    return 1
  done
  return 0
}

# pl_machine_matches KINDS KIND: is KIND in the comma list KINDS (or KINDS *)?
pl_machine_matches() {
  [[ $1 == '*' || ,$1, == *,$2,* ]]
}

# pl_machine_kind: this machine's kind: h200x<N> (N H200 GPUs), <gpu>x<N> for
# another GPU (the lower-cased model without spaces), cpu without a GPU.
pl_machine_kind() {
  local names n
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
  n=$(grep -c . <<<"$names" || true)
  if [[ -z $names || $n == 0 ]]; then echo cpu; return; fi
  local m
  m=$(head -n 1 <<<"$names" | tr 'A-Z' 'a-z' | sed -E 's/nvidia//; s/[^a-z0-9]+//g; s/^(h100|h200|a100|b200|gh200|l40s).*/\1/')
  echo "${m}x$n"
}

# ---- what a point is planned against ---------------------------------------------
# A training point runs only where the plan says it fits, and the bench's dry
# run plans on the host it runs on (no GPU is needed to validate a sweep):
# a GPU point is therefore given the capacity of the machine it will run on,
# from jobs/machines.tsv (PL_MACHINES), or this host's GPUs when their kind is
# not listed there and the point runs here.
PL_MACHINES=${PL_MACHINES:-jobs/machines.tsv}

# pl_size_bytes SIZE: SIZE (digits, optionally Ki Mi Gi Ti) in bytes on
# stdout; 1 when malformed
pl_size_bytes() {
  local v=$1 m=1
  [[ $v =~ ^([0-9]+)(Ki|Mi|Gi|Ti)?$ ]] || return 1
  case ${BASH_REMATCH[2]} in Ki) m=1024 ;; Mi) m=$((1 << 20)) ;; Gi) m=$((1 << 30)) ;; Ti) m=$((1 << 40)) ;; esac
  echo $((BASH_REMATCH[1] * m))
}

# pl_gib BYTES: "139.80" (GiB, two decimals)
pl_gib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1073741824}'; }

# pl_machine_caps KIND: KIND's row of $PL_MACHINES into PL_CAP_GPN,
# PL_CAP_DEV, PL_CAP_DEV_RES, PL_CAP_HOST, PL_CAP_HOST_RES (bytes),
# PL_CAP_SET (its plan_set, empty for -) and PL_CAP_SRC; 1 when KIND is not
# listed, 2 (PL_ERR) when its row is malformed.
pl_machine_caps() {
  local kind=$1 k gpn dev dres host hres pset src v x vals
  [[ -r $PL_MACHINES ]] || { PL_ERR="$PL_MACHINES: cannot read"; return 2; }
  while IFS=$'\t' read -r k gpn dev dres host hres pset src; do
    [[ $k == "$kind" ]] || continue
    vals=()
    for v in "$dev" "$dres" "$host" "$hres"; do
      x=$(pl_size_bytes "$v") ||
        { PL_ERR="$PL_MACHINES: kind $kind: '$v' is not a size (bytes, or with Ki Mi Gi Ti)"; return 2; }
      vals+=("$x")
    done
    [[ $gpn =~ ^[1-9][0-9]*$ ]] ||
      { PL_ERR="$PL_MACHINES: kind $kind: gpus_per_node '$gpn' must be a positive integer"; return 2; }
    [[ $pset == - || $pset =~ ^[a-z_0-9]+=[^,[:space:]]+(,[a-z_0-9]+=[^,[:space:]]+)*$ ]] ||
      { PL_ERR="$PL_MACHINES: kind $kind: plan_set '$pset' must be - or key=value,..."; return 2; }
    PL_CAP_GPN=$gpn PL_CAP_SRC=$src PL_CAP_SET=${pset#-}
    PL_CAP_DEV=${vals[0]} PL_CAP_DEV_RES=${vals[1]} PL_CAP_HOST=${vals[2]} PL_CAP_HOST_RES=${vals[3]}
    return 0
  done < <(grep -v '^#' "$PL_MACHINES")
  return 1
}

# pl_host_caps: this host into PL_CAP_* as the bench measures it: the
# smallest GPU's memory (nvidia-smi) and MemTotal; the planner's reserves.
pl_host_caps() {
  local mib
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | sort -n | head -n 1)
  [[ $mib =~ ^[0-9]+$ ]] || return 1
  PL_CAP_DEV=$((mib << 20)) PL_CAP_DEV_RES=$((4 << 30)) PL_CAP_HOST_RES=$((4 << 30)) PL_CAP_SET=
  PL_CAP_HOST=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))
  PL_CAP_SRC="this host (nvidia-smi, /proc/meminfo)"
}

# pl_point_backend ARGS: the backend a plateau point runs on: its --backend
# word, else $BACKEND (default cpu)
pl_point_backend() {
  local i w be=${BACKEND:-cpu}
  pl_split_args "$1" || { echo "$be"; return; }
  for ((i = 0; i < ${#PL_ARGV[@]}; i++)); do
    w=${PL_ARGV[$i]}
    [[ $w == --backend=* ]] && be=${w#--backend=}
    [[ $w == --backend ]] && be=${PL_ARGV[$((i + 1))]:-$be}
  done
  echo "$be"
}

# pl_plan_caps KIND HERE NODES NTASKS GPN ARGS: what a training point is
# planned against, into PL_PLAN_SET (key=value,... for `plateau plan --set`),
# PL_PLAN_BENCH (1: `plateau bench train --plan-set` gets it too; 0: the
# bench plans on this host as it measures it, which is where a CPU point
# runs) and PL_PLAN_CAP (which capacity, in words).  KIND is the machine kind
# the point will run on; HERE 1 when it runs on this host.  A CPU point is
# planned on this host's memory (as the bench does: the device is the host;
# reserves 0 and 2 GiB); a GPU point on KIND's row of $PL_MACHINES, this
# host's GPUs when KIND is not listed and the point runs here, else the row
# "default" (the planner's own machine).  A point's own --mem-limit is its
# device capacity (the run's allocator enforces it).  Returns 2 (PL_ERR) on a
# malformed table.
pl_plan_caps() {
  local kind=$1 here=$2 nodes=$3 ntasks=$4 gpn=$5 args=$6 rc=0 what rpn total avail
  PL_PLAN_SET= PL_PLAN_CAP= PL_PLAN_BENCH=0
  rpn=$((gpn > 0 ? gpn : ntasks / nodes))
  if [[ $(pl_point_backend "$args") != cuda ]]; then
    total=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))
    avail=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024))
    PL_PLAN_SET="backend=cpu,hbm_bytes=$total,hbm_reserve=0,host_bytes=$avail,host_reserve=2Gi,gpus_per_node=$rpn"
    PL_PLAN_CAP="this host's memory (cpu backend): $(pl_gib "$total") GiB, $(pl_gib "$avail") GiB available"
    return 0
  fi
  PL_PLAN_BENCH=1
  pl_machine_caps "$kind" || rc=$?
  ((rc == 2)) && return 2
  if ((rc == 0)); then
    what="$kind ($PL_MACHINES)"
  elif [[ $here == 1 ]] && pl_host_caps; then
    what="$PL_CAP_SRC"
  else
    rc=0
    pl_machine_caps default || rc=$?
    ((rc == 0)) || { [[ -n $PL_ERR ]] || PL_ERR="$PL_MACHINES has no row 'default'"; return 2; }
    what="the planner's defaults ('${kind:-no kind}' is not in $PL_MACHINES)"
  fi
  PL_PLAN_SET="host_bytes=$PL_CAP_HOST,host_reserve=$PL_CAP_HOST_RES,gpus_per_node=$rpn${PL_CAP_SET:+,$PL_CAP_SET}"
  local host="host $(pl_gib $((PL_CAP_HOST - PL_CAP_HOST_RES))) GiB usable per node of $(pl_gib "$PL_CAP_HOST"), $rpn rank(s) per node"
  pl_split_args "$args" || true
  if [[ " ${PL_ARGV[*]} " == *" --mem-limit "* || " ${PL_ARGV[*]} " == *" --mem-limit="* ]]; then
    PL_PLAN_CAP="$what: device the point's --mem-limit, $host"
  else
    PL_PLAN_SET="hbm_bytes=$PL_CAP_DEV,hbm_reserve=$PL_CAP_DEV_RES,$PL_PLAN_SET"
    PL_PLAN_CAP="$what: device $(pl_gib $((PL_CAP_DEV - PL_CAP_DEV_RES))) GiB usable of $(pl_gib "$PL_CAP_DEV"), $host"
  fi
  return 0
}

# pl_point_kind HERE_KIND RUN_KIND POINT_KINDS SWEEP_KIND: the machine kind a
# point will run on (into PL_KIND): HERE_KIND (jobs/run on a host with GPUs:
# it runs here), else RUN_KIND (--machine, unless all), else the point's
# machine column when it names one kind, else the sweep's "# machine:".
pl_point_kind() {
  PL_KIND=
  if [[ -n $1 && $1 != cpu ]]; then PL_KIND=$1
  elif [[ -n $2 && $2 != all ]]; then PL_KIND=$2
  elif [[ $3 != '*' && $3 != *,* ]]; then PL_KIND=$3
  else PL_KIND=$4; fi
}

# ---- resume ------------------------------------------------------------------
# pl_point_recorded DIR POINT [BENCH]: true when the point is done: a result
# file directly in DIR has the metadata line "# point: POINT" and a closing
# "# end: ok" line (the harness writes both: --point ID, and "# end: ok <utc>"
# when the run finished); for a peer (BENCH peer:*), its state file's last
# line is "end ... 0".
pl_point_recorded() {
  local dir=$1 point=$2 bench=${3:-} f
  [[ -d $dir ]] || return 1
  if [[ $bench == peer:* ]]; then
    f=$dir/logs/$point.state
    [[ -f $f ]] && [[ $(tail -n 1 "$f") =~ ^end\ [^\ ]+\ 0$ ]]
    return
  fi
  while IFS= read -r f; do
    grep -qE '^# end: ok( |$)' "$f" && return 0
  done < <(grep -lxF -- "# point: $point" "$dir"/*.tsv 2>/dev/null || true)
  return 1
}

# ---- launchers -------------------------------------------------------------------
# pl_launcher WHERE NODES NTASKS GPN: the MPI launcher of a point into the
# array PL_LAUNCH.
#   WHERE slurm: srun --mpi=pmix inside the allocation, tasks spread evenly over
#     the nodes; with GPUs one task per GPU and every task seeing all of its
#     node's GPUs (--gpu-bind=none: plateau binds rank r to the GPU of its
#     local rank, SLURM_LOCALID; a per-task CUDA_VISIBLE_DEVICES would hide the
#     peers from CUDA IPC and take NCCL off NVLink).  PL_GPU_BIND (e.g.
#     closest), PL_CPU_BIND (e.g. cores) and PL_SRUN_ARGS (words) add to it.
#   WHERE local: mpirun (MPIRUN, default mpirun) on this machine: -np NTASKS,
#     --bind-to none, --oversubscribe beyond the cores, --allow-run-as-root as
#     root.  NODES > 1 runs all ranks here.
pl_launcher() {
  local where=$1 nodes=$2 ntasks=$3 gpn=$4 extra=()
  if [[ $where == slurm ]]; then
    PL_LAUNCH=(srun --mpi=pmix --nodes="$nodes" --ntasks="$ntasks" --ntasks-per-node=$((ntasks / nodes)))
    ((gpn > 0)) && PL_LAUNCH+=(--gpu-bind="${PL_GPU_BIND:-none}")
    [[ -n ${PL_CPU_BIND:-} ]] && PL_LAUNCH+=(--cpu-bind="$PL_CPU_BIND")
    if [[ -n ${PL_SRUN_ARGS:-} ]]; then
      pl_split_args "$PL_SRUN_ARGS" && extra=("${PL_ARGV[@]}")
      PL_LAUNCH+=("${extra[@]}")
    fi
  else
    pl_split_args "${MPIRUN:-mpirun}" && PL_LAUNCH=("${PL_ARGV[@]}")
    [[ $(id -u) == 0 ]] && PL_LAUNCH+=(--allow-run-as-root)
    ((ntasks > $(nproc))) && PL_LAUNCH+=(--oversubscribe)
    PL_LAUNCH+=(--bind-to none -np "$ntasks")
  fi
}

# pl_slurm_threads: the OpenMP and OpenBLAS threads of each task of a Slurm
# job, exported (the result files record both): SLURM_CPUS_PER_TASK (sbatch
# -c), else the caller's OMP_NUM_THREADS, else 1.  Slurm gives a task one CPU
# unless asked for more, and threads beyond a task's CPUs spin on the cores
# of the other tasks (libgomp's idle threads): every rank slows down.
pl_slurm_threads() {
  local t=${SLURM_CPUS_PER_TASK:-${OMP_NUM_THREADS:-1}}
  export OMP_NUM_THREADS=$t
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$t}
}

# pl_nccl_env: the NCCL environment of a GPU point, exported unless already
# set: NCCL_NVLS_ENABLE=0 (NVLink SHARP multicast off: machines that lend GPUs
# in slices, or whose fabric manager does not grant multicast, fail or hang in
# NCCL's NVLS setup; plateau's collectives do not need it) and NCCL_DEBUG=WARN.
# Any other NCCL_* variable of the caller (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ...)
# passes through: sbatch exports the environment to the job.
pl_nccl_env() {
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
}

# pl_point_cmd WHERE DIR ID BENCH NODES NTASKS GPN LAUNCH ARGS: the command of
# a point into PL_CMD (the launcher first, placeholders expanded), or 1 with
# PL_ERR.  Plateau benches get --point ID -o DIR (and --backend $BACKEND,
# default cpu, unless ARGS name a backend); a peer runs python3
# analysis/peers/NAME.py ARGS.  For launch ranks PL_CMD is one rank's command
# with {rank} left in it (pl_point_exec runs one per rank).
pl_point_cmd() {
  local where=$1 dir=$2 id=$3 bench=$4 nodes=$5 ntasks=$6 gpn=$7 launch=$8 args=$9 w
  pl_split_args "$args" || return 1
  local words=("${PL_ARGV[@]}") prog=() tail=()
  pl_launcher "$where" "$nodes" "$ntasks" "$gpn"
  local launch_str
  launch_str=$(pl_quote "${PL_LAUNCH[@]}")
  if [[ $bench == peer:* ]]; then
    local script=${PL_PEERS_DIR:-analysis/peers}/${bench#peer:}.py
    [[ -f $script ]] || { PL_ERR="no peer script $script"; return 1; }
    prog=(python3 "$script")
  else
    prog=("$PL_BIN" bench "$bench")
    tail=(-o "$dir" --point "$id")
    local has_backend=0
    for w in "${words[@]}"; do [[ $w == --backend || $w == --backend=* ]] && has_backend=1; done
    ((has_backend)) || tail+=(--backend "${BACKEND:-cpu}")
  fi
  PL_CMD=()
  if [[ $launch == mpi ]]; then
    PL_CMD=("${PL_LAUNCH[@]}")
  elif [[ $launch == single && $where == slurm ]]; then
    # one process as its own step (SLURM_NTASKS=1 there), sharing the
    # allocation with the steps it launches through {launch}
    PL_CMD=(srun --mpi=pmix --nodes=1 --ntasks=1 --overlap)
    launch_str+=" --overlap"
  fi
  PL_CMD+=("${prog[@]}")
  for w in "${words[@]}"; do
    pl_subst "$w" launch "$launch_str" ntasks "$ntasks" out "$dir"
    PL_CMD+=("$PL_WORD")
  done
  PL_CMD+=("${tail[@]}")
  return 0
}

pl_utc() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# ---- locks -------------------------------------------------------------------
# A point's lock, DIR/logs/ID.lock, is flock(1)ed by the run of the point and
# inherited by every process the run starts: it is held exactly as long as
# any of them lives (a jobs/run killed with SIGKILL leaves its point's
# processes holding it) and never longer (the kernel drops a lock with its
# last holder: a lock file left by a dead run blocks nothing).  jobs/run
# holds the same kind of lock on its run directory (DIR/run.lock), which its
# points inherit too.  A lock file says "WHAT ID HOST UTC" (session 123 vm
# 2026-...: the point's processes are session 123's), for the message.
# Where the file system has no flock, runs go on unlocked, with a warning.

# pl_lock_busy FILE: true when another process holds FILE's lock
pl_lock_busy() {
  [[ -f $1 ]] || return 1
  local rc=0
  flock -n -E 75 "$1" true 2>/dev/null || rc=$?
  [[ $rc == 75 ]]
}

# pl_lock FILE: take FILE's lock (exclusive, not waiting) on a new fd,
# PL_LOCK_FD.  1 when another process holds it (PL_ERR says who).
pl_lock() {
  local f=$1 rc=0
  PL_LOCK_FD= PL_ERR=
  exec {PL_LOCK_FD}>>"$f" 2>/dev/null || { PL_ERR="cannot open $f"; return 1; }
  flock -n -E 75 "$PL_LOCK_FD" 2>/dev/null || rc=$?
  if [[ $rc == 75 ]]; then
    exec {PL_LOCK_FD}>&-
    PL_LOCK_FD=
    PL_ERR="held by $(pl_lock_who "$f")"
    return 1
  elif [[ $rc != 0 ]]; then
    echo "# warning: cannot lock $f (a file system without flock?): running without a lock" >&2
  fi
  return 0
}

# pl_lock_who FILE: who holds it, in words, from its content
pl_lock_who() {
  local what id host utc
  read -r what id host utc <"$1" 2>/dev/null || true
  if [[ $id =~ ^[0-9]+$ ]]; then
    echo "$what $id on ${host:-?} since ${utc:-?}$([[ $what == session ]] && echo " (its processes: ps -s $id)")"
  else
    echo "a run that has not recorded its id yet"
  fi
}

# pl_point_busy DIR ID: true (PL_ERR: who) when the point's lock is held
pl_point_busy() {
  PL_ERR=
  pl_lock_busy "$1/logs/$2.lock" || return 1
  PL_ERR=$(pl_lock_who "$1/logs/$2.lock")
}

# ---- running a point ------------------------------------------------------------
# pl_point_exec DIR ID WHERE LAUNCH NTASKS -- CMD...: run a point's command,
# its output to stdout and appended to DIR/logs/ID.log, its state to
# DIR/logs/ID.state ("start UTC WHERE", then "end UTC RC"; a run killed with
# SIGKILL leaves the start line last), under the point's lock (returns 2,
# PL_ERR, when another run holds it).  The command runs in a session of its
# own (setsid: its pid is the session of everything it starts, the launcher
# and the ranks): SIGTERM, SIGINT or SIGHUP to the caller stops every process
# of that session (SIGTERM, then SIGKILL after PL_KILL_WAIT seconds, default
# 10), records "end UTC 128+SIG" and exits 128+SIG, so that no process of the
# point outlives the run that started it.  LAUNCH ranks: NTASKS copies at
# once with {rank} = 0..NTASKS-1 (locally; under Slurm srun runs them,
# SLURM_PROCID).  Returns the command's exit code (the worst rank's).
pl_point_exec() {
  local dir=$1 id=$2 where=$3 launch=$4 ntasks=$5
  shift 6
  local log=$dir/logs/$id.log state=$dir/logs/$id.state rc=0 r w x out tee_pid cmd
  mkdir -p "$dir/logs"
  if ! pl_lock "$dir/logs/$id.lock"; then
    PL_ERR="point $id is running already: $PL_ERR"
    echo "# $PL_ERR: not started again" >&2
    return 2
  fi
  PL_POINT_LOCK_FD=$PL_LOCK_FD PL_POINT_STATE=$state PL_POINT_LOG=$log PL_POINT_SIDS=()
  echo "start $(pl_utc) $where" >>"$state"
  echo "# ---- $(pl_utc) $where: $(pl_quote "$@")" >>"$log"
  exec {out}> >(tee -a "$log")
  tee_pid=$!
  trap 'pl__point_signal TERM 15' TERM
  trap 'pl__point_signal INT 2' INT
  trap 'pl__point_signal HUP 1' HUP
  if [[ $launch == ranks && $where == slurm* ]]; then
    # one task per rank; each substitutes its SLURM_PROCID for {rank}
    setsid -w srun --ntasks="$ntasks" bash -c 'a=(); for w in "$@"; do a+=("${w//\{rank\}/$SLURM_PROCID}"); done; exec "${a[@]}"' \
      plateau-rank "$@" >&"$out" 2>&1 {out}>&- &
    PL_POINT_SIDS+=($!)
  elif [[ $launch == ranks ]]; then
    for ((r = 0; r < ntasks; r++)); do
      cmd=()
      for w in "$@"; do cmd+=("${w//\{rank\}/$r}"); done
      setsid -w "${cmd[@]}" >&"$out" 2>&1 {out}>&- &
      PL_POINT_SIDS+=($!)
    done
  else
    setsid -w "$@" >&"$out" 2>&1 {out}>&- &
    PL_POINT_SIDS+=($!)
  fi
  printf 'session %s %s %s\n' "${PL_POINT_SIDS[0]}" "$(hostname -s)" "$(pl_utc)" >"$dir/logs/$id.lock"
  for r in "${PL_POINT_SIDS[@]}"; do
    x=0
    wait "$r" || x=$?
    ((x > rc)) && rc=$x
  done
  pl__point_reap "${PL_POINT_SIDS[@]}"
  trap - TERM INT HUP
  exec {out}>&-
  wait "$tee_pid" 2>/dev/null || true
  if [[ $rc != 0 ]]; then
    local why=
    [[ $rc == 124 ]] && why=" (killed at the point's time limit)"
    [[ $rc -gt 128 && $rc != 255 ]] && why=" (signal $((rc - 128)))"
    echo "# exit $rc$why" >>"$log"
  fi
  echo "end $(pl_utc) $rc" >>"$state"
  exec {PL_POINT_LOCK_FD}>&-
  return "$rc"
}

# pl__point_reap SID...: what is left of a point's sessions once its
# launcher has returned: ranks can outlive mpirun and `timeout` (mpirun puts
# each rank in a process group of its own, and timeout signals its own
# group), so the point is over only when its sessions are empty: SIGTERM,
# up to 5 s, then SIGKILL, up to 2 s more.
pl__point_reap() {
  local i
  [[ -n $(pl_session_pids "$@") ]] || return 0
  pl_session_kill TERM "$@"
  for ((i = 0; i < 50; i++)); do
    [[ -z $(pl_session_pids "$@") ]] && return 0
    sleep 0.1
  done
  pl_session_kill KILL "$@"
  for ((i = 0; i < 20; i++)); do
    [[ -z $(pl_session_pids "$@") ]] && return 0
    sleep 0.1
  done
  return 0
}

# pl_session_pids SID...: the live processes of the sessions SID... (a zombie, which
# has ended and waits to be reaped, is not one).  A point's processes are
# found by session, not process group: mpirun puts each rank in a process
# group of its own.
pl_session_pids() {
  ps -e -o pid=,sid=,stat= 2>/dev/null |
    awk -v s=" $* " 'index(s, " " $2 " ") && $3 !~ /^Z/ {print $1}'
}

# pl_session_kill SIGNAL SID...: SIGNAL to every live process of the sessions
pl_session_kill() {
  local sig=$1 sid p
  shift
  for sid in "$@"; do
    for p in $(pl_session_pids "$sid"); do kill "-$sig" "$p" 2>/dev/null || true; done
  done
}

# pl__point_signal NAME NUMBER: the trap of pl_point_exec: stop the point's
# sessions, record it, exit 128+NUMBER
pl__point_signal() {
  local name=$1 num=$2 g i alive
  trap - TERM INT HUP
  echo "# $(pl_utc): SIG$name received: stopping the point (session(s) ${PL_POINT_SIDS[*]})" >&2
  pl_session_kill TERM "${PL_POINT_SIDS[@]}"
  for ((i = 0; i < ${PL_KILL_WAIT:-10} * 10; i++)); do
    alive=0
    for g in "${PL_POINT_SIDS[@]}"; do [[ -n $(pl_session_pids "$g") ]] && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  if ((alive)); then
    echo "# the point ignored SIGTERM for ${PL_KILL_WAIT:-10}s: SIGKILL" >&2
    pl_session_kill KILL "${PL_POINT_SIDS[@]}"
  fi
  echo "# exit $((128 + num)) (SIG$name to the run: the point was stopped)" >>"$PL_POINT_LOG"
  echo "end $(pl_utc) $((128 + num))" >>"$PL_POINT_STATE"
  exit $((128 + num))
}

# ---- checks before anything runs -----------------------------------------------
# pl_validate_point DIR ID BENCH NODES NTASKS GPN LAUNCH ARGS KIND HERE: the
# program's own check of the point (`plateau bench BENCH --dry-run=RANKS
# ARGS`: the options parsed and validated, each point's identity as on
# NTASKS ranks; a training point planned against the machine it will run on,
# pl_plan_caps KIND HERE, through --plan-set), then the planner's
# (pl_plan_check).  Returns 0 valid, 1 invalid (PL_ERR: the program's
# message), 4 infeasible (every point infeasible, or the planner says it
# cannot fit; PL_ERR: why).  PL_NOTE: a one-line summary; PL_PLAN_CAP: the
# capacity planned against (empty: nothing planned).
pl_validate_point() {
  local dir=$1 id=$2 bench=$3 nodes=$4 ntasks=$5 gpn=$6 launch=$7 args=$8 kind=${9:-} here=${10:-0} out rc ranks=$5
  PL_ERR= PL_NOTE= PL_PLAN_SET= PL_PLAN_CAP=
  if [[ $bench == peer:* ]]; then
    local script=${PL_PEERS_DIR:-analysis/peers}/${bench#peer:}.py
    [[ -f $script ]] || { PL_ERR="no peer script $script"; return 1; }
    PL_NOTE="peer script present"
    return 0
  fi
  pl_point_cmd local "$dir" "$id" "$bench" "$nodes" "$ntasks" "$gpn" single "$args" || return 1
  [[ $launch == mpi ]] || ranks=1
  local cmd=() w # rank 0's command stands for every rank's
  for w in "${PL_CMD[@]}"; do cmd+=("${w//\{rank\}/0}"); done
  if [[ $bench == train ]]; then
    pl_plan_caps "$kind" "$here" "$nodes" "$ntasks" "$gpn" "$args" || return 1
    [[ $PL_PLAN_BENCH == 0 ]] || cmd+=(--plan-set "$PL_PLAN_SET")
  fi
  out=$("${cmd[@]}" --dry-run="$ranks" 2>&1)
  rc=$?
  if [[ $rc != 0 ]]; then
    PL_ERR=$(grep -v '^# dry run' <<<"$out" | grep . | tail -n 3 | tr '\n' ' ')
    [[ -n $PL_ERR ]] || PL_ERR="plateau bench $bench --dry-run exited $rc"
    return 1
  fi
  PL_NOTE=$(grep '^dry run: ok' <<<"$out" | head -n 1)
  if [[ $PL_NOTE =~ ok,\ ([0-9]+)\ points?\ \(([0-9]+)\ infeasible\) ]] &&
    ((BASH_REMATCH[1] > 0 && BASH_REMATCH[1] == BASH_REMATCH[2])); then
    PL_ERR="every point infeasible on $ranks rank(s): $(grep -m1 'infeasible:' <<<"$out" | sed 's/.*infeasible: //')"
    return 4
  fi
  pl_plan_check "$bench" "$ntasks" "$gpn" "$args" "$PL_PLAN_SET"
}

# pl_plan_check BENCH NTASKS GPN ARGS [SET]: the planner's feasibility of a
# training point, when the build has `plateau plan` (suite/cli/plan_cmd.c:
# exit 0 fits, 1 does not fit, 2 bad input, 3 error).  For a `train` point with
# --model given, each context of --seq is asked
#   plateau plan --model M --gpus NTASKS [--gpus-per-node GPN] [--set SET]
#                [--backend cpu] --seq S
#                [--config explicit --D --P --virtual --system --sco --optim
#                 --dispatch --head --c --beta --slots, from the point's own
#                 -D --P --virtual-world --system --sco-budget --optim
#                 --dispatch --head --chunk-cap --bucket --slots]
# (explicit when the point fixes any of them; else the planner searches
# them); the point is infeasible (return 4, PL_ERR the planner's verdict)
# when no context fits.  Any other bench, a preset, a list of systems, a
# range of contexts, a build without `plan` or a planner error: 0 (the
# submission goes on; the run itself records oom rows).
pl_plan_check() {
  local bench=$1 ntasks=$2 gpn=$3 args=$4 set=${5:-} out rc w i
  [[ $bench == train ]] || return 0
  "$PL_BIN" plan --help >/dev/null 2>&1 || return 0
  pl_split_args "$args" || return 0
  local words=("${PL_ARGV[@]}") model= seqs= explicit=() plan=()
  local -A map=([-D]=--D [--D]=--D [-P]=--P [--P]=--P [--virtual-world]=--virtual [--system]=--system
    [--sco-budget]=--sco [--optim]=--optim [--dispatch]=--dispatch [--head]=--head [--chunk-cap]=--c
    [--bucket]=--beta [--slots]=--slots)
  for ((i = 0; i < ${#words[@]}; i++)); do
    w=${words[$i]}
    local name=${w%%=*} val=
    if [[ $w == *=* ]]; then val=${w#*=}; elif ((i + 1 < ${#words[@]})); then val=${words[$((i + 1))]}; fi
    case $name in
      --preset) return 0 ;;
      --model) model=$val ;;
      --seq) seqs=$val ;;
      *)
        if [[ -n ${map[$name]:-} ]]; then
          [[ $name == --system && $val == *,* ]] && return 0
          [[ $name == --virtual-world && $val == 0 ]] || explicit+=("${map[$name]}" "$val")
        fi ;;
    esac
  done
  [[ -n $model && -n $seqs && $seqs != *:* ]] || return 0
  plan=(--model "$model" --gpus "$ntasks")
  ((gpn > 0)) && plan+=(--gpus-per-node "$gpn")
  [[ -n $set ]] && plan+=(--set "$set")
  [[ ${#explicit[@]} -gt 0 ]] && plan+=(--config explicit "${explicit[@]}")
  local s why= fits=0
  for s in ${seqs//,/ }; do
    out=$("$PL_BIN" plan "${plan[@]}" --seq "$s" 2>&1)
    rc=$?
    case $rc in
      0) fits=1 ;;
      1) why+="${why:+; }S=$s: $(grep -m1 -E 'NOT FIT|binding' <<<"$out" || tail -n 1 <<<"$out")" ;;
      *) return 0 ;; # the planner cannot judge it: the run will
    esac
  done
  ((fits)) && return 0
  PL_ERR="planner: $why"
  return 4
}

# pl_mark_infeasible DIR ID WHY: record that a point was not run because it
# cannot fit (jobs/status and the report list it).
pl_mark_infeasible() {
  mkdir -p "$1/logs"
  echo "infeasible $(pl_utc) $3" >>"$1/logs/$2.state"
}
