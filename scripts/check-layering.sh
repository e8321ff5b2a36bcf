#!/usr/bin/env bash
# Keeps the app crate's modules one-way (ARCHITECTURE.md, "Layers"). Each module of
# crates/cipherbench/src has a rank; a module may use `crate::` paths only to modules
# of a lower rank, or to itself. So the four layers (speed, file, tls, tunnel) share
# a rank and cannot import one another, nothing below the command line can import
# it or `run`, and no import circle can form. `crate::` paths to anything else (the
# crate root's items, such as `crate::main`) are refused, and so is `clap` outside
# `cli/` (the layers get resolved plans, never flags). A `super::` path that climbs
# out of a module's folder is refused too, so it cannot go around the rule.
#
# It also holds ARCHITECTURE.md's module map to the ranks: every ranked module is in
# the map, each rank drawn above the ranks below it.
#
# Prints every offending line as file:line: why: code, and exits 1 if there is any.
# Usage: scripts/check-layering.sh [SRC_DIR]  (default: crates/cipherbench/src)
set -euo pipefail

cd "$(dirname "$0")/.."
src=${1:-crates/cipherbench/src}

# Bottom to top. Changing this list changes the architecture: update ARCHITECTURE.md.
ranks=(
  "host interrupt progress"       # 0: facts of this machine, Ctrl-C, the printer
  "supervisor machine"            # 1: external programs (under keepers), the CPU layout and noise
  "lifetime effect library"       # 2: what a run leaves outside its processes, swept; the effect probe a variant's process runs; the OpenSSL under test, and which one each part loaded
  "results probe agent"           # 3: the results sink (locked, swept); the machine's probe; agents on other hosts (launcher over ssh, protocol, clocks)
  "variant"                       # 4: the acceleration variant every layer shares
  "campaign"                      # 5: the measuring skeleton every layer's runner stands on (resume, the variants' start and end)
  "speed file tls tunnel"         # 6: the four layers, siblings
  "run agent_server"              # 7: `cipherbench run`, over the layers; `cipherbench agent`'s loop, handing requests to the layers
  "cli"                           # 8: the command line, on top
)

rank_of() {
  local i
  for i in "${!ranks[@]}"; do
    if [[ " ${ranks[$i]} " == *" $1 "* ]]; then
      echo "$i"
      return
    fi
  done
  echo -1
}

problems=()
report() { problems+=("$1:$2: $3: $(sed -e 's/^[[:space:]]*//' <<<"$4")"); }

check_file() {
  local file=$1 rel=${1#"$src"/}
  local module=${rel%%/*}
  module=${module%.rs}
  local own
  own=$(rank_of "$module")
  if ((own < 0)); then
    report "$file" 1 "module '$module' has no rank" "add it to the ranks in $0"
    return
  fi
  # Module depth below the crate root: x.rs and x/mod.rs are 1, x/y.rs is 2, ...
  local path=${rel%.rs}
  path=${path%/mod}
  local slashes=${path//[^\/]/}
  local depth=$((${#slashes} + 1))

  local hit number text
  while IFS= read -r hit; do
    number=${hit%%:*}
    text=${hit#*:}
    [[ $text =~ ^[[:space:]]*// ]] && continue
    local code=${text%%//*}

    if [[ $module != cli && $code =~ (^|[^A-Za-z0-9_])clap([^A-Za-z0-9_]|$) ]]; then
      report "$file" "$number" "clap outside cli/ (take a resolved plan instead)" "$text"
    fi

    local target
    while IFS= read -r target; do
      [[ -z $target ]] && continue
      local names=${target#crate::}
      names=${names#\{}
      names=${names%\}}
      local name
      for name in ${names//,/ }; do
        name=${name%%::*}
        [[ -z $name || $name == self ]] && continue
        [[ $name == "$module" ]] && continue
        local theirs
        theirs=$(rank_of "$name")
        if ((theirs < 0)); then
          report "$file" "$number" "crate::$name is the crate root or an unranked module" "$text"
        elif ((theirs >= own)); then
          report "$file" "$number" "$module may not use $name (same rank or above)" "$text"
        fi
      done
    done < <(grep -oE 'crate::(\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*)' <<<"$code" || true)

    # super:: chains: at the top of a file, `depth` of them reach the crate root;
    # indented (inside a nested module such as `mod tests`), one more does.
    if [[ $code =~ ((super::)+) ]]; then
      local chain=${BASH_REMATCH[1]}
      local k=$((${#chain} / 7))
      local limit=$depth
      [[ $code =~ ^[[:space:]] ]] && limit=$((depth + 1))
      if ((k >= limit)); then
        report "$file" "$number" "super:: climbs out of $module/ (use crate:: so the rule can see it)" "$text"
      fi
    fi
  done < <(grep -nE 'crate::|clap|super::' "$file" || true)
}

while IFS= read -r file; do
  case $file in
    "$src/lib.rs" | "$src/main.rs") continue ;; # the crate root: above everything
  esac
  check_file "$file"
done < <(find "$src" -name '*.rs' | sort)

# ARCHITECTURE.md's module map must match the ranks: every ranked module named in
# it (as `name/` or `name.rs`), each rank drawn above the ones below it.
doc=ARCHITECTURE.md
if [[ $src == crates/cipherbench/src && -f $doc ]]; then
  map=$(awk '/^## Modules of the app/ {s = 1} s && /^```/ {n++; if (n == 2) exit; next} n == 1' "$doc")
  previous_lowest=0
  for ((r = ${#ranks[@]} - 1; r >= 0; r--)); do
    highest=999999
    lowest=0
    for m in ${ranks[$r]}; do
      line=$(grep -nE "(^|[[:space:]])$m(/|\.rs)([^A-Za-z0-9_]|$)" <<<"$map" | head -1 | cut -d: -f1 || true)
      if [[ -z $line ]]; then
        problems+=("$doc: module '$m' (rank $r) is missing from the module map")
        continue
      fi
      ((line < highest)) && highest=$line
      ((line > lowest)) && lowest=$line
    done
    if ((highest != 999999 && highest < previous_lowest)); then
      problems+=("$doc: the module map draws rank $r (${ranks[$r]}) above a higher rank")
    fi
    ((lowest > previous_lowest)) && previous_lowest=$lowest
  done
fi

if ((${#problems[@]})); then
  printf '%s\n' "${problems[@]}" >&2
  echo "layering: ${#problems[@]} problem(s) against the module ranks in $0" >&2
  exit 1
fi
echo "layering: ok (each module uses only modules of a lower rank; ARCHITECTURE.md's map draws the ranks in order)"
