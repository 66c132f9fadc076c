#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# For the VM tests only: faults on request, to show that whatever happens
# to the menu, nmbl-init brings it back and never a shell.  Listens on the
# second serial port (the test's own line, not the console a user types
# on), one command a line, and answers each on that line:
#   ping          NMBL-FAULT ready
#   kill SIGNAL   sends SIGNAL to grub-emu: NMBL-FAULT killed <pid> <SIGNAL>
#   kill-console  SIGKILL to nmbl-console, the menu's parent
#   oom           makes grub-emu the OOM killer's choice, then runs it
#                 (SysRq f through /proc, which the console's keys cannot)
# A machine without that port gets no listener.
set -u

port=/dev/ttyS1

pid_of() {
	for d in /proc/[0-9]*; do
		read -r comm <"$d/comm" 2>/dev/null || continue
		if [ "$comm" = "$1" ]; then
			echo "${d#/proc/}"
			return 0
		fi
	done
	return 1
}

serve() {
	while read -r cmd arg <&3; do
		case $cmd in
		ping)
			echo "NMBL-FAULT ready" >&3
			;;
		kill)
			if pid=$(pid_of grub-emu) && kill -s "$arg" "$pid"; then
				echo "NMBL-FAULT killed $pid $arg" >&3
			else
				echo "NMBL-FAULT failed kill $arg" >&3
			fi
			;;
		kill-console)
			if pid=$(pid_of nmbl-console) && kill -s KILL "$pid"; then
				echo "NMBL-FAULT killed $pid console" >&3
			else
				echo "NMBL-FAULT failed kill-console" >&3
			fi
			;;
		oom)
			if pid=$(pid_of grub-emu) && echo 1000 >"/proc/$pid/oom_score_adj" &&
				echo f >/proc/sysrq-trigger; then
				echo "NMBL-FAULT oom $pid" >&3
			else
				echo "NMBL-FAULT failed oom" >&3
			fi
			;;
		*)
			echo "NMBL-FAULT unknown $cmd" >&3
			;;
		esac
	done
}

# A port the machine lacks fails to open: then only this job ends.
serve 3<>"$port" 2>/dev/null &
