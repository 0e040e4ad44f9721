#!/usr/bin/env bash
# test_tokens.sh — `plateau tokens IN OUT`: the shard of a text file has the
# 24-byte header (magic PLTOKENS, version 1, width 2, the count) and one
# uint16 token per input byte, in order; an empty file gives 0 tokens; --help
# exits 0.  Nothing of the user's is ever removed or changed: bad arguments
# (a missing or non-regular IN — a directory, a FIFO, /dev/zero —, an IN over
# the 4 GiB limit, an OUT that is a directory, a device, a FIFO or a dangling
# link, OUT the same file as IN by any path, an unwritable directory) exit 2
# at once and leave every file as it was; a write that fails midway exits 3,
# leaves an existing OUT intact and no temporary file; a regular OUT is
# replaced only when the shard is complete, through a symbolic link the
# link's target; an empty OUT is refused before anything is converted; a
# SIGKILLed run's temporary file (.OUT.HOST.PID.XXXXXX beside OUT) is
# removed by the next run for that OUT once its PID is gone, and nothing
# else is.
# Usage: BUILD=build bash suite/cli/test_tokens.sh
set -uo pipefail
PL_TEST=test_tokens.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

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
expect_rc 2 "$BIN" tokens "$tmp/missing.txt" "$tmp/x.tok"
[[ ! -e $tmp/x.tok ]] && pass || fail "a failed run left its output"
expect_rc 2 "$BIN" tokens "$tmp/in.txt" "$tmp/no/such/dir/x.tok"

# ---- nothing of the user's is removed or changed -------------------------
# fixture files and their checksums; each case must leave them all as they were
k=$tmp/keep
mkdir -p "$k/d"
echo precious >"$k/v.txt"
echo inside >"$k/d/f"
echo same >"$k/F"
ln "$k/F" "$k/F.hard"
ln -s F "$k/F.sym"
ln -s nothing "$k/dangling"
mkfifo "$k/fifo"
sums() { (cd "$k" && find . -printf '%p %y %l\n' | sort && md5sum v.txt d/f F 2>&1); }
before=$(sums)
# case EXIT MSG-REGEX IN OUT: exit code, message, and the fixture unchanged
case_() {
  local want=$1 re=$2 err rc
  shift 2
  err=$(timeout 20 "$BIN" tokens "$@" 2>&1 >/dev/null)
  rc=$?
  [[ $rc -eq $want ]] || { fail "tokens $* -> exit $rc (want $want): $err"; return; }
  [[ $err =~ $re ]] || { fail "tokens $*: message '$err' does not match /$re/"; return; }
  [[ $(sums) == "$before" ]] || { fail "tokens $* changed the fixture: $(diff <(echo "$before") <(sums) | tr '\n' ' ')"; return; }
  [[ -z $(find "$k" -name '.*.??????' -print -quit) ]] || { fail "tokens $* left a temporary file"; return; }
  pass
}
case_ 2 'IN=.*/d: not a regular file \(a directory\)' "$k/d" "$k/v.txt"
case_ 2 'OUT=.*/d: is a directory' "$k/v.txt" "$k/d"
case_ 2 'the same file as IN' "$k/F" "$k/F"
case_ 2 'the same file as IN' "$k/F" "$k/F.hard"
case_ 2 'the same file as IN' "$k/F" "$k/F.sym"
case_ 2 'the same file as IN' "$k/F.sym" "$k/F"
case_ 2 'the same file as IN' "$k/F" "$k/../keep/./F"
case_ 2 'a symbolic link to a missing file' "$k/v.txt" "$k/dangling"
case_ 2 'IN=.*fifo: not a regular file \(a FIFO\)' "$k/fifo" "$k/out.tok"
case_ 2 'OUT=.*fifo: is a FIFO' "$k/v.txt" "$k/fifo"
case_ 2 'IN=/dev/zero: not a regular file \(a character device\)' /dev/zero "$k/out.tok"
if [[ $EUID -eq 0 ]]; then # device nodes of our own (/dev/null's, /dev/full's
  # numbers): a broken build must never be pointed at the system's
  mknod "$k/nul" c 1 3 && mknod "$k/full" c 1 7 && before=$(sums)
  case_ 2 'OUT=.*nul: is a character device' "$k/v.txt" "$k/nul"
  case_ 2 'OUT=.*full: is a character device' "$k/v.txt" "$k/full"
  [[ -c $k/full && -c $k/nul ]] && pass || fail "a device node is gone"
else # root ignores permissions: the unwritable directory only as a user
  mkdir "$k/ro" && chmod 555 "$k/ro" && before=$(sums)
  case_ 2 'cannot create a file in .*/ro: Permission denied' "$k/v.txt" "$k/ro/x.tok"
fi
truncate -s 5G "$k/huge" && before=$(sums) # sparse: no disk used
case_ 2 'IN=.*huge: 5368709120 bytes: too large \(allowed: at most 4294967296' "$k/huge" "$k/out.tok"

# a write that fails midway (the file size limit: EFBIG) exits 3 and leaves
# the existing OUT as it was
head -c 200000 /dev/urandom >"$k/big.bin"
before=$(sums)
err=$(bash -c 'trap "" XFSZ; ulimit -f 64; exec "$@"' _ "$BIN" tokens "$k/big.bin" "$k/v.txt" 2>&1)
rc=$?
[[ $rc -eq 3 && $err == *"write failed"* ]] && pass || fail "a failed write: exit $rc '$err' (want 3, write failed)"
[[ $(sums) == "$before" ]] && pass || fail "a failed write changed the fixture"
[[ -z $(find "$k" -name '.*.??????' -print -quit) ]] && pass || fail "a failed write left its temporary file"

# a regular OUT is replaced when complete; through a link, the link's target
printf 'ab' >"$k/two.txt"
"$BIN" tokens "$k/two.txt" "$k/v.txt" >/dev/null 2>&1 && [[ $(stat -c %s "$k/v.txt") -eq 28 ]] && pass ||
  fail "an existing regular OUT was not replaced by the shard"
echo old >"$k/target.tok"
ln -s target.tok "$k/link.tok"
"$BIN" tokens "$k/two.txt" "$k/link.tok" >/dev/null 2>&1 && [[ -L $k/link.tok && $(stat -c %s "$k/target.tok") -eq 28 ]] && pass ||
  fail "OUT through a symbolic link: the link or its target is wrong"

# an empty OUT is refused before IN is read: exit 2, nothing converted or
# written (in the working directory either)
mkdir -p "$k/cwd" && before=$(sums)
err=$(cd "$k/cwd" && "$BIN" tokens "$k/big.bin" '' 2>&1)
rc=$?
[[ $rc -eq 2 && $err == *"OUT='': an empty path"* && -z $(ls -A "$k/cwd") && $(sums) == "$before" ]] && pass ||
  fail "tokens IN '': exit $rc '$err', cwd: $(ls -A "$k/cwd")"

# a SIGKILLed run leaves its temporary file beside OUT (.OUT.HOST.PID.XXXXXX,
# no handler runs); the next run for that OUT removes it once the PID is
# gone, and leaves a live PID's, another host's and other names alone
host=$(hostname | tr '/.' '__')
[[ -n $host ]] || host=-
mkdir -p "$k/kill"
truncate -s 1G "$k/kill/huge.txt"
"$BIN" tokens "$k/kill/huge.txt" "$k/kill/out.tok" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do
  [[ -n $(find "$k/kill" -name ".out.tok.$host.$pid.??????" -size +0 -print -quit) ]] && break
  sleep 0.05
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
left=$(find "$k/kill" -name ".out.tok.$host.$pid.??????")
[[ -n $left && ! -e $k/kill/out.tok ]] && pass || fail "a SIGKILLed run: temporary '$left', out.tok $(ls "$k/kill")"
sleep 30 &
live=$!
: >"$k/kill/.out.tok.$host.$live.abcdef"      # a running PID's
: >"$k/kill/.out.tok.otherhost.$pid.abcdef"   # another host's
: >"$k/kill/.out.tok.$host.$pid.keep"         # not a temporary name
printf 'ab' >"$k/kill/two.txt"
err=$("$BIN" tokens "$k/kill/two.txt" "$k/kill/out.tok" 2>&1)
rc=$?
[[ $rc -eq 0 && ! -e $left && $(stat -c %s "$k/kill/out.tok") -eq 28 ]] && pass ||
  fail "the next run: exit $rc, $(ls -A "$k/kill" | tr '\n' ' ')"
[[ $err == *"removed $k/kill/.out.tok.$host.$pid."*"(PID $pid) that was killed"* ]] && pass ||
  fail "the next run does not say what it removed: $err"
[[ -e $k/kill/.out.tok.$host.$live.abcdef && -e $k/kill/.out.tok.otherhost.$pid.abcdef && -e $k/kill/.out.tok.$host.$pid.keep ]] &&
  pass || fail "the next run removed a file that is not a dead run's: $(ls -A "$k/kill" | tr '\n' ' ')"
kill $live 2>/dev/null
wait $live 2>/dev/null
rm -f "$k/kill/huge.txt"

echo "$PL_TEST: $npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
