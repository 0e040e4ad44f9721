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
#   point          id, [A-Za-z0-9][A-Za-z0-9._-]*, unique in the file (required)
#   bench          a `plateau bench` name, or peer:NAME for analysis/peers/NAME.py
#                  ($PL_PEERS_DIR/NAME.py when set) (required)
#   ntasks         ranks of the point, in all (required)
#   nodes          nodes (default 1)
#   gpus_per_node  GPUs per node to allocate (default 0: none; then with launch
#                  mpi, one task per GPU: ntasks = nodes x gpus_per_node)
#   time           Slurm time limit of the point, [D-]HH:MM:SS or MM (default 00:30:00)
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
# *.cu, *.h, *.def, not test_*) newer than the plateau binary.
pl_stale_sources() {
  local d dirs=()
  for d in engine suite baselines; do [[ -d $d ]] && dirs+=("$d"); done
  [[ ${#dirs[@]} -gt 0 ]] || return 0
  find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.def' \) \
    ! -name 'test_*' -newer "$PL_BIN" 2>/dev/null || true
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
    [[ -z ${seen[$p]:-} ]] || { PL_ERR="$at repeats line ${seen[$p]}"; return 1; }
    [[ $b =~ ^(peer:)?[a-z0-9_]+$ ]] || { PL_ERR="$at: bench '$b' is not a bench name (or peer:NAME)"; return 1; }
    [[ $n =~ ^[1-9][0-9]*$ ]] || { PL_ERR="$at: ntasks '$n' must be a positive integer"; return 1; }
    [[ $nodes =~ ^[1-9][0-9]*$ ]] || { PL_ERR="$at: nodes '$nodes' must be a positive integer"; return 1; }
    [[ $gpn =~ ^[0-9]+$ ]] || { PL_ERR="$at: gpus_per_node '$gpn' must be an integer >= 0"; return 1; }
    [[ $tl =~ ^([0-9]+-)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}$ || $tl =~ ^[0-9]+$ ]] ||
      { PL_ERR="$at: time '$tl' must be [D-]HH:MM:SS or minutes"; return 1; }
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

# pl_point_exec DIR ID WHERE LAUNCH NTASKS -- CMD...: run a point's command,
# its output to stdout and appended to DIR/logs/ID.log, its state to
# DIR/logs/ID.state ("start UTC WHERE", then "end UTC RC"; a killed run
# leaves the start line last).  LAUNCH ranks: NTASKS copies at once with
# {rank} = 0..NTASKS-1 (locally; under Slurm srun runs them, SLURM_PROCID).
# Returns the command's exit code (the worst rank's).
pl_point_exec() {
  local dir=$1 id=$2 where=$3 launch=$4 ntasks=$5
  shift 6
  local log=$dir/logs/$id.log state=$dir/logs/$id.state rc=0 r w
  mkdir -p "$dir/logs"
  echo "start $(pl_utc) $where" >>"$state"
  echo "# ---- $(pl_utc) $where: $(pl_quote "$@")" >>"$log"
  set +e
  if [[ $launch == ranks && $where == slurm* ]]; then
    # one task per rank; each substitutes its SLURM_PROCID for {rank}
    srun --ntasks="$ntasks" bash -c 'a=(); for w in "$@"; do a+=("${w//\{rank\}/$SLURM_PROCID}"); done; exec "${a[@]}"' \
      plateau-rank "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
  elif [[ $launch == ranks ]]; then
    local pids=() cmd
    for ((r = 0; r < ntasks; r++)); do
      cmd=()
      for w in "$@"; do cmd+=("${w//\{rank\}/$r}"); done
      "${cmd[@]}" > >(tee -a "$log") 2>&1 &
      pids+=($!)
    done
    for r in "${pids[@]}"; do
      wait "$r"
      local x=$?
      ((x > rc)) && rc=$x
    done
  else
    "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
  fi
  set -e
  if [[ $rc != 0 ]]; then
    local why=
    [[ $rc == 124 ]] && why=" (killed at the point's time limit)"
    [[ $rc -gt 128 && $rc != 255 ]] && why=" (signal $((rc - 128)))"
    echo "# exit $rc$why" >>"$log"
  fi
  echo "end $(pl_utc) $rc" >>"$state"
  return "$rc"
}

# ---- checks before anything runs -----------------------------------------------
# pl_validate_point DIR ID BENCH NODES NTASKS GPN LAUNCH ARGS: the program's
# own check of the point (`plateau bench BENCH --dry-run=RANKS ARGS`: the
# options parsed and validated, each point's identity as on NTASKS ranks),
# then the planner's (pl_plan_check).  Returns 0 valid, 1 invalid (PL_ERR: the
# program's message), 4 infeasible (every point infeasible, or the planner
# says it cannot fit; PL_ERR: why).  PL_NOTE: a one-line summary.
pl_validate_point() {
  local dir=$1 id=$2 bench=$3 nodes=$4 ntasks=$5 gpn=$6 launch=$7 args=$8 out rc ranks=$5
  PL_ERR= PL_NOTE=
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
  pl_plan_check "$bench" "$ntasks" "$gpn" "$args"
}

# pl_plan_check BENCH NTASKS GPN ARGS: the planner's feasibility of a
# training point, when the build has `plateau plan` (suite/plan.c: exit 0
# fits, 1 does not fit, 2 bad input, 3 error).  For a `train` point with
# --model given, each context of --seq is asked
#   plateau plan --model M --gpus NTASKS [--gpus-per-node GPN] --seq S
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
  local bench=$1 ntasks=$2 gpn=$3 args=$4 out rc w i
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
