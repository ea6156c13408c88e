#!/usr/bin/env bash
# imports: the crate's top-level modules each top-level module of src/ uses (`crate::NAME`,
# test code left out), and every use that points up the layer table of docs/architecture.md.
# Rerun it after a change; docs/architecture.md keeps its last output. It fails (exit 1) on a
# use that points up and is not one of the known ones below, so a new upward edge stops CI (it
# always exited 0, and one was added unnoticed: simulate -> actions).
set -euo pipefail
# The upward uses docs/architecture.md accounts for, to be removed as the layers are mended
# (issue 48): none may be added.
known="inputs->simulate inputs->ui"
cd "$(dirname "$0")/.."
layer() {
	case $1 in
	units | error | url | files | process | allocator | budget | out) echo 0 ;;
	model | config) echo 1 ;;
	sources | inputs | store | record | act) echo 2 ;;
	advisor | schedule | simulate) echo 3 ;;
	actions) echo 4 ;;
	ui) echo 5 ;;
	engine | app | commands | cli) echo 6 ;;
	*) echo 9 ;;
	esac
}
# A file's code before its first #[cfg(test)], without comments.
code() { awk '/^[[:space:]]*#\[cfg\(test\)\]/ { exit } { print }' "$1" | grep -v '^[[:space:]]*//'; }
up=0
new=""
for f in src/*.rs; do
	m=$(basename "$f" .rs)
	case $m in lib | main | *_tests) continue ;; esac
	files=$f
	[ -d "src/$m" ] && files="$f $(find "src/$m" -name '*.rs' ! -name '*_tests.rs' | sort | tr '\n' ' ')"
	deps=$(for x in $files; do code "$x"; done | grep -o 'crate::[a-z_]*' | sed 's/crate:://' | sort -u | grep -vx "$m" | tr '\n' ' ' || true)
	printf '%-10s (layer %s) uses: %s\n' "$m" "$(layer "$m")" "${deps:-nothing}"
	for d in $deps; do
		if [ "$(layer "$d")" -gt "$(layer "$m")" ]; then
			printf '    up: %s -> %s\n' "$m" "$d"
			up=$((up + 1))
			case " $known " in
			*" $m->$d "*) ;;
			*) new="$new $m->$d" ;;
			esac
		fi
	done
done
echo "uses pointing up: $up"
if [ -n "$new" ]; then
	echo "imports: new uses pointing up:$new (keep the layers: move the code down, or the type it needs)" >&2
	exit 1
fi
