# Sourced by scripts/default-vs-named.sh and scripts/sim-vs-testbed.sh, which run a scratch copy of a
# scenario file from another folder.
# link_beside FILE DIR: links into DIR every file beside FILE that is not a scenario (the traces
# and schedules a scenario names relative to itself), so the copy in DIR still finds them.
link_beside() {
  local f
  for f in "$(dirname "$1")"/*; do
    case $f in *.toml) ;; *) ln -sf "$(realpath "$f")" "$2/" ;; esac
  done
}
