# Sourced by the bench drivers that take variables only (sh bench/run-*.sh),
# right after their `set -u`: --help prints the driver's header comment (its
# lines up to `set -u`) and exits 0; any other argument is refused (exit 2)
# before the driver makes its output folder.
case ${1:-} in
-h | --help) sed -n '2,/^set -u$/{/^set -u$/d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
"") ;;
*) echo "$(basename "$0"): takes no arguments, only variables (see --help)" >&2; exit 2 ;;
esac
