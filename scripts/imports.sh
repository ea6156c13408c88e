#!/usr/bin/env bash
# imports: the crate's top-level modules each top-level module of src/ uses (`crate::NAME`,
# test code left out), and every use that points up the layer table of docs/architecture.md.
# Rerun it after a change; docs/architecture.md keeps its last output.
set -euo pipefail
cd "$(dirname "$0")/.."
layer() {
	case $1 in
	units | error | url | files | process | allocator | budget | out) echo 0 ;;
	model | config) echo 1 ;;
	sources | inputs | store | record) echo 2 ;;
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
		fi
	done
done
echo "uses pointing up: $up"
