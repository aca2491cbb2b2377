# Part of guest.sh (sourced by it, in its shell: say, check, num, oneline,
# flat and started are its, as are $CPU and the runs' files), kept apart
# for its length: passive mode beside rtla.
# Beside rtla (kernels with the osnoise and timerlat tracers: the guest
# then carries the suite's rtla): passive mode on the tracer's own thread,
# attached first and waiting for its name, so it sees the thread's whole
# life, and osnoise made to sample over that same life. osnoise counts only
# inside its periods, and between two it writes its sample (and, at a new
# maximum, raises an irq_work to notify it: on PREEMPT_RT the irq_work and
# rcuc threads then run): noise that reaches the thread outside osnoise's
# window. rtla also counts nothing once it turns tracing off at its end,
# while the thread samples on until rtla's teardown stops it. So: one
# period of 10 s (runtime = period: the thread never sleeps), no maximum to
# notify (the instance's tracing_max_latency set out of reach), and the
# thread stopped 6 s after it began to run, inside that period and while rtla
# still records, by emptying osnoise's CPU list (tracefs osnoise/cpus: the
# kernel stops the thread, which records its partial period as it ends).
# rtla is stopped (SIGINT: it drains and prints) once it has read that
# sample. Then, per class, rtla's count and ours:
#   JWTEST rtla_tool=osnoise|timerlat class=NAME rtla=N jw=N
# and the runs' own lines (JWTEST rtla-run=...) for the report's detail.
# rtla itself runs on the other CPUs (6.1's rtla has no -H). timerlat runs
# its 10 s (-d): its thread sleeps between activations, so only its
# wake-ups are compared, whose edge is a few of 10,000.
# Also osnoise's gaps (its sample_threshold events, over the same life, in
# the top-level trace buffer): those with interference and those without
# (HW noise), beside jitterwatch's gaps at the same 1 us threshold:
#   JWTEST rtla_gaps osnoise=N hw=N overrun=N jw=N interrupted=N preempted=N
TR=/sys/kernel/tracing
# Whether a thread named $1 is there and, with $2 = R, running (state R:
# osnoise's thread, created, sleeps until rtla has turned tracing on, a
# second or more under TCG).
thread_up() {
	for f in $(grep -lx "$1" /proc/[0-9]*/comm 2>/dev/null); do
		[ -z "$2" ] && return 0
		[ "$(cut -d' ' -f3 "${f%/comm}/stat" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
# Waits up to $2 tenths of a second for a thread named $1 to run (or, with
# $3 = gone, to be gone).
wait_thread() {
	i=0
	while [ $i -lt "$2" ]; do
		if [ "$3" = gone ]; then thread_up "$1" || return 0; else thread_up "$1" R && return 0; fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
if [ -x /usr/bin/rtla ] && grep -qw osnoise $TR/available_tracers 2>/dev/null; then
	HOUSE=0-$((CPU - 1))
	# rtla from 6.9 on runs timerlat's workload as a user thread when the
	# kernel can (timerlatu/N); older ones as a kernel thread (timerlat/N).
	TL=timerlat
	/usr/bin/rtla timerlat top -h 2>&1 | grep -q -- '--user-threads' && TL=timerlatu
	for tool in osnoise timerlat; do
		T=$tool
		[ $tool = timerlat ] && T=$TL
		TH=
		[ $tool = osnoise ] && TH="--threshold 1us"
		jitterwatch --comm "$T/$CPU" --cpus "$CPU" $TH --duration 300s --no-tui --json >/tmp/r.json 2>/tmp/r.err &
		J=$!
		started /tmp/r.err $J
		case $tool in
		osnoise)
			echo mono >$TR/trace_clock
			echo 16384 >$TR/per_cpu/cpu$CPU/buffer_size_kb
			echo >$TR/trace
			echo 1 >$TR/events/osnoise/sample_threshold/enable
			taskset -c "$HOUSE" /usr/bin/rtla osnoise top -c "$CPU" -q -p 10000000 -r 10000000 -T 1 >/tmp/rtla.txt 2>&1 &
			;;
		timerlat) taskset -c "$HOUSE" /usr/bin/rtla timerlat top -c "$CPU" -d 10s -q $([ $TL = timerlatu ] && echo -u) >/tmp/rtla.txt 2>&1 & ;;
		esac
		R=$!
		CUT=-
		if [ $tool = osnoise ] && wait_thread "$T/$CPU" 600; then
			# No new maximum to notify (an irq_work osnoise raises after
			# the sample, outside it).
			echo 100000000 >$TR/instances/osnoise_top/tracing_max_latency 2>/dev/null
			sleep 6
			# Empty (or, where a kernel refuses an empty list, the first CPU).
			{ echo >$TR/osnoise/cpus || echo 0 >$TR/osnoise/cpus; } 2>/dev/null
			wait_thread "$T/$CPU" 100 gone && CUT=stopped
			# rtla reads its buffer once a second.
			sleep 2
			echo 0 >$TR/events/osnoise/sample_threshold/enable
			kill -INT $R
		fi
		wait $R
		R=$?
		kill -INT $J
		wait $J
		say "rtla-run=$tool thread=$T/$CPU rtla_status=$R jw_status=$? cut=$CUT $(oneline /tmp/rtla.txt 2 | tr -s ' ' | cut -c1-200)"
		case $tool in
		osnoise)
			# CPU Period Runtime Noise %CPU-Aval MaxNoise MaxSingle HW NMI IRQ Softirq Thread
			set -- $(awk -v c="$CPU" '$1 == c { print $9, $10, $11, $12 }' /tmp/rtla.txt)
			for class in nmi irq softirq thread; do
				say "rtla_tool=osnoise class=$class rtla=${1:--} jw=$(num $class /tmp/r.json)"
				shift
			done
			# ... [003] ... 12.34: sample_threshold: start 12.33 duration 5 interference 1
			say "rtla_gaps $(awk -v c="[$(printf %03d "$CPU")]" '
				$0 ~ /sample_threshold:/ && index($0, c) { if ($NF > 0) n++; else hw++ }
				END { printf "osnoise=%d hw=%d", n, hw }' $TR/trace) overrun=$(awk '$1 == "overrun:" { print $2 }' $TR/per_cpu/cpu$CPU/stats) jw=$(num hiccups /tmp/r.json) interrupted=$(num interrupted /tmp/r.json) preempted=$(num preempted /tmp/r.json)"
			;;
		timerlat)
			# CPU COUNT | ...: the thread's activations.
			say "rtla_tool=timerlat class=wakeups rtla=$(awk -v c="$CPU" '$1 == c { sub("#", "", $2); print $2 }' /tmp/rtla.txt) jw=$(num wakeups /tmp/r.json)"
			;;
		esac
	done
fi
