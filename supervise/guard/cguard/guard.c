// The guard of package supervise/guard, in C, run by a constructor before
// the Go runtime starts (see doc.go). It keeps the Go guard's protocol to
// the letter: the same flags, descriptors, signals, reports and tree
// guarantees. Whatever it does not fully understand (a flag it does not
// know, a value it cannot parse, a protocol it does not speak) it leaves to
// the Go guard, by returning, so that every refusal and usage error is the
// Go guard's own.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

enum { fd_result = 3, fd_lock = 4, fd_trust = 5 };
enum { exit_internal = 70, exit_lease_lost = 76 };

// ---- a growable buffer, for reports and messages ----

struct buf {
	char *b;
	size_t n, cap;
};

static void put(struct buf *s, const char *p, size_t n) {
	if (s->n + n + 1 > s->cap) {
		size_t c = s->cap ? s->cap : 256;
		while (s->n + n + 1 > c)
			c *= 2;
		char *nb = realloc(s->b, c);
		if (nb == NULL)
			return; // out of memory: the report is cut short, never corrupt
		s->b = nb;
		s->cap = c;
	}
	memcpy(s->b + s->n, p, n);
	s->n += n;
	s->b[s->n] = 0;
}

static void puts_(struct buf *s, const char *p) { put(s, p, strlen(p)); }

static void putint(struct buf *s, long long v) {
	char d[24];
	int i = sizeof d;
	int neg = v < 0;
	unsigned long long u = neg ? -(unsigned long long)v : (unsigned long long)v;
	do {
		d[--i] = '0' + u % 10;
		u /= 10;
	} while (u);
	if (neg)
		d[--i] = '-';
	put(s, d + i, sizeof d - i);
}

// utf8len is the length of the valid UTF-8 sequence at p (of n bytes), as
// Go's utf8.DecodeRune accepts it, or 0 if there is none.
static int utf8len(const unsigned char *p, size_t n) {
	unsigned c = p[0];
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xe0 && p[1] < 0xa0)
			return 0; // overlong
		if (c == 0xed && p[1] >= 0xa0)
			return 0; // a surrogate
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		if (c == 0xf0 && p[1] < 0x90)
			return 0; // overlong
		if (c == 0xf4 && p[1] >= 0x90)
			return 0; // beyond U+10FFFF
		return 4;
	}
	return 0;
}

// putjson appends s as a JSON string, as the Go guard's appendString does.
static void putjson(struct buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	put(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		if (c < 0x80) {
			char e[6] = {'\\', 0};
			if (c == '"' || c == '\\') {
				e[1] = c;
				put(b, e, 2);
			} else if (c == '\n') {
				put(b, "\\n", 2);
			} else if (c == '\r') {
				put(b, "\\r", 2);
			} else if (c == '\t') {
				put(b, "\\t", 2);
			} else if (c < 0x20) {
				char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
				put(b, u, 6);
			} else {
				put(b, (const char *)&s[i], 1);
			}
			i++;
			continue;
		}
		int l = utf8len((const unsigned char *)s + i, n - i);
		if (l == 0) {
			put(b, "\\ufffd", 6);
			i++;
		} else {
			put(b, s + i, l);
			i += l;
		}
	}
	put(b, "\"", 1);
}

// ---- the processes of the tree, from /proc ----

struct proc {
	int pid;
	struct buf argv; // NUL-separated, as in /proc/PID/cmdline
	int gone;        // no argv could be read (JSON null)
};

struct procs {
	struct proc *p;
	int n, cap;
};

static void procs_free(struct procs *ps) {
	for (int i = 0; i < ps->n; i++)
		free(ps->p[i].argv.b);
	free(ps->p);
	ps->p = NULL;
	ps->n = ps->cap = 0;
}

static ssize_t readfile(const char *path, struct buf *out) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char chunk[4096];
	ssize_t r, total = 0;
	while ((r = read(fd, chunk, sizeof chunk)) > 0) {
		put(out, chunk, r);
		total += r;
	}
	close(fd);
	return r < 0 ? -1 : total;
}

// readargv reads a process's argv as procfs.Argv does: its cmdline without
// trailing NULs, else "[comm]", else none (gone).
static void readargv(int pid, struct proc *p) {
	char path[64];
	p->argv = (struct buf){0};
	p->gone = 0;
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	if (readfile(path, &p->argv) > 0) {
		while (p->argv.n > 0 && p->argv.b[p->argv.n - 1] == 0)
			p->argv.n--;
		return;
	}
	free(p->argv.b);
	p->argv = (struct buf){0};
	struct buf comm = {0};
	snprintf(path, sizeof path, "/proc/%d/comm", pid);
	if (readfile(path, &comm) < 0) {
		free(comm.b);
		p->gone = 1;
		return;
	}
	size_t a = 0, z = comm.n;
	while (z > a && strchr(" \t\n", comm.b[z - 1]))
		z--;
	while (a < z && strchr(" \t\n", comm.b[a]))
		a++;
	put(&p->argv, "[", 1);
	put(&p->argv, comm.b + a, z - a);
	put(&p->argv, "]", 1);
	free(comm.b);
}

// descendants lists every live process below root, as the Go guard's
// Descendants does: every /proc/PID/stat read once, zombies left out, the
// tree followed by ppid, breadth first.
static void descendants(int root, struct procs *out) {
	struct pp {
		int pid, ppid;
	} *all = NULL;
	int n = 0, cap = 0;
	int self = getpid();
	DIR *d = opendir("/proc");
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != 0 || pid <= 0 || pid == self)
			continue;
		char path[64];
		struct buf st = {0};
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if (readfile(path, &st) <= 0) {
			free(st.b);
			continue;
		}
		char *rp = strrchr(st.b, ')');
		char state = 0;
		int ppid = -1;
		if (rp != NULL && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && state != 'Z' && state != 'X') {
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				all = realloc(all, cap * sizeof *all);
				if (all == NULL) {
					free(st.b);
					closedir(d);
					return;
				}
			}
			all[n++] = (struct pp){(int)pid, ppid};
		}
		free(st.b);
	}
	closedir(d);
	// Breadth first from root's children: out grows as it is walked.
	int *queue = malloc((n + 1) * sizeof *queue), qn = 0;
	char *seen = calloc(n + 1, 1);
	if (queue == NULL || seen == NULL)
		goto done;
	for (int i = 0; i < n; i++)
		if (all[i].ppid == root)
			queue[qn++] = i, seen[i] = 1;
	for (int q = 0; q < qn; q++) {
		int i = queue[q];
		if (out->n == out->cap) {
			out->cap = out->cap ? 2 * out->cap : 16;
			struct proc *np = realloc(out->p, out->cap * sizeof *np);
			if (np == NULL)
				goto done;
			out->p = np;
		}
		struct proc *p = &out->p[out->n++];
		p->pid = all[i].pid;
		readargv(p->pid, p);
		for (int j = 0; j < n; j++)
			if (!seen[j] && all[j].ppid == all[i].pid)
				queue[qn++] = j, seen[j] = 1;
	}
done:
	free(queue);
	free(seen);
	free(all);
}

// describe renders processes as the Go guard's Describe: "pid 12 (sleep 2), …".
static void describe(struct buf *b, const struct procs *ps) {
	for (int i = 0; i < ps->n; i++) {
		if (i > 0)
			puts_(b, ", ");
		puts_(b, "pid ");
		putint(b, ps->p[i].pid);
		puts_(b, " (");
		const struct buf *a = &ps->p[i].argv;
		for (size_t j = 0; j < a->n; j++)
			put(b, a->b[j] ? &a->b[j] : " ", 1);
		puts_(b, ")");
	}
}

// ---- the report ----

struct report {
	int started, done, exit_code, trust_expired;
	struct procs strays;
	const char *error; // NULL: none
};

static void put_report(struct buf *b, const struct report *r) {
	put(b, "{", 1);
	if (r->started) {
		puts_(b, "\"started\":");
		putint(b, r->started);
		put(b, ",", 1);
	}
	if (r->done)
		puts_(b, "\"done\":true,");
	puts_(b, "\"exit_code\":");
	putint(b, r->exit_code);
	if (r->strays.n > 0) {
		puts_(b, ",\"strays\":[");
		for (int i = 0; i < r->strays.n; i++) {
			const struct proc *p = &r->strays.p[i];
			if (i > 0)
				put(b, ",", 1);
			puts_(b, "{\"pid\":");
			putint(b, p->pid);
			puts_(b, ",\"argv\":");
			if (p->gone) {
				puts_(b, "null");
			} else {
				put(b, "[", 1);
				size_t start = 0;
				for (size_t j = 0; j <= p->argv.n; j++) {
					if (j == p->argv.n || p->argv.b[j] == 0) {
						if (start > 0)
							put(b, ",", 1);
						putjson(b, p->argv.b ? p->argv.b + start : "", j - start);
						start = j + 1;
					}
				}
				put(b, "]", 1);
			}
			put(b, "}", 1);
		}
		put(b, "]", 1);
	}
	if (r->error != NULL && r->error[0]) {
		puts_(b, ",\"error\":");
		putjson(b, r->error, strlen(r->error));
	}
	if (r->trust_expired)
		puts_(b, ",\"trust_expired\":true");
	puts_(b, "}\n");
}

static void writeall(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= w;
	}
}

// finish writes the last report and exits, as the Go guard's finish.
static void finish(struct report *r) {
	if (r->error != NULL && r->error[0]) {
		struct buf m = {0};
		puts_(&m, "baton: ");
		puts_(&m, r->error);
		puts_(&m, "\n");
		writeall(2, m.b, m.n);
	}
	r->done = 1;
	struct buf b = {0};
	put_report(&b, r);
	writeall(fd_result, b.b, b.n);
	close(fd_result);
	_exit(0);
}

// errtext is strerror as Go's syscall.Errno words it: lower case first.
static const char *errtext(int e, char *out, size_t n) {
	snprintf(out, n, "%s", strerror(e));
	if (out[0] >= 'A' && out[0] <= 'Z' && !(out[1] >= 'A' && out[1] <= 'Z'))
		out[0] += 'a' - 'A';
	return out;
}

// fail finishes with code and the error "what" + "what2" + ": " + err's
// words, as the Go guard words a failed system call.
static void fail(int code, const char *what, const char *what2, int err) {
	struct buf m = {0};
	char e[128];
	puts_(&m, what);
	puts_(&m, what2);
	puts_(&m, ": ");
	puts_(&m, errtext(err, e, sizeof e));
	finish(&(struct report){.exit_code = code, .error = m.b});
}

// ---- clocks ----

static int64_t clock_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t boot_now(void) { return clock_ns(CLOCK_BOOTTIME); }

// ---- the flags ----

struct options {
	const char *protocol, *strays, *path;
	int64_t kill_after; // ns
	long ppid;
	int trust;
	char **argv;
};

// parse_duration parses what Go's time.Duration.String writes (and the
// rest of time.ParseDuration's grammar); -1 for anything else.
static int64_t parse_duration(const char *s) {
	if (strcmp(s, "0") == 0)
		return 0;
	if (*s == '+')
		s++;
	if (*s == 0 || *s == '-')
		return -1;
	double total = 0;
	while (*s) {
		if (!(*s >= '0' && *s <= '9') && *s != '.')
			return -1;
		char *end;
		errno = 0;
		double v = strtod(s, &end);
		if (end == s || errno)
			return -1;
		s = end;
		double unit;
		if (strncmp(s, "ns", 2) == 0)
			unit = 1, s += 2;
		else if (strncmp(s, "us", 2) == 0)
			unit = 1e3, s += 2;
		else if (strncmp(s, "\xc2\xb5s", 3) == 0 || strncmp(s, "\xce\xbcs", 3) == 0)
			unit = 1e3, s += 3;
		else if (strncmp(s, "ms", 2) == 0)
			unit = 1e6, s += 2;
		else if (*s == 's')
			unit = 1e9, s += 1;
		else if (*s == 'm')
			unit = 60e9, s += 1;
		else if (*s == 'h')
			unit = 3600e9, s += 1;
		else
			return -1;
		total += v * unit;
		if (total > 9.2e18)
			return -1;
	}
	return (int64_t)total;
}

// parse_args reads the flags as the Go guard's parseArgs; 0 when they are
// not all understood.
static int parse_args(char **args, struct options *o) {
	*o = (struct options){.strays = "wait", .kill_after = 10000000000LL};
	const char *ppid = NULL;
	while (*args) {
		const char *a = *args;
		if (strcmp(a, "--") == 0) {
			args++;
			break;
		}
		if (strlen(a) < 2 || a[0] != '-')
			break;
		const char *name = a + 1;
		if (*name == '-')
			name++;
		args++;
		size_t nl = strlen(name);
		const char *value = NULL;
		const char *eq = strchr(name, '=');
		if (eq != NULL) {
			nl = eq - name;
			value = eq + 1;
		}
		if (nl == 5 && strncmp(name, "trust", 5) == 0) {
			o->trust = value == NULL || strcmp(value, "true") == 0;
			continue;
		}
		if (value == NULL) {
			if (*args == NULL)
				return 0;
			value = *args++;
		}
		if (nl == 8 && strncmp(name, "protocol", 8) == 0) {
			o->protocol = value;
		} else if (nl == 6 && strncmp(name, "strays", 6) == 0) {
			o->strays = value;
		} else if (nl == 10 && strncmp(name, "kill-after", 10) == 0) {
			if ((o->kill_after = parse_duration(value)) < 0)
				return 0;
		} else if (nl == 4 && strncmp(name, "ppid", 4) == 0) {
			ppid = value;
		} else if (nl == 4 && strncmp(name, "path", 4) == 0) {
			o->path = value;
		} else {
			return 0;
		}
	}
	if (ppid != NULL) {
		char *end;
		errno = 0;
		o->ppid = strtol(ppid, &end, 10);
		if (*ppid == 0 || *end != 0 || errno || ppid[0] == ' ')
			return 0;
	}
	o->argv = args;
	return *args != NULL && o->path != NULL && o->protocol != NULL;
}

// ---- the guard ----

static int main_pid;        // the command's pid, also its process group
static volatile int64_t *trust_cell; // NULL: no trust window
static struct options opt;

static void signal_tree(int sig) {
	kill(-main_pid, sig);
	struct procs ps = {0};
	descendants(getpid(), &ps);
	for (int i = 0; i < ps.n; i++)
		kill(ps.p[i].pid, sig);
	procs_free(&ps);
}

static void kill_tree(void) {
	for (int i = 0; i < 50; i++) {
		signal_tree(SIGKILL);
		struct procs ps = {0};
		descendants(getpid(), &ps);
		int left = ps.n;
		procs_free(&ps);
		if (left == 0)
			return;
		struct timespec ms5 = {0, 5000000};
		nanosleep(&ms5, NULL);
	}
}

static int has_children(void) {
	siginfo_t info;
	for (;;) {
		if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0)
			return 1;
		if (errno != EINTR)
			return errno != ECHILD;
	}
}

static int exit_status(int ws) {
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return WEXITSTATUS(ws);
}

// on_reaped acts on one reaped child as the Go guard's onReaped; 1 when the
// guard is done (strays reported and left behind).
static int on_reaped(int pid, int ws, struct report *res, int64_t *grace) {
	if (pid != main_pid)
		return 0;
	res->exit_code = exit_status(ws);
	if (!has_children())
		return 0;
	struct procs left = {0};
	descendants(getpid(), &left);
	if (left.n == 0) {
		procs_free(&left);
		return 0;
	}
	procs_free(&res->strays);
	res->strays = left;
	// The same note as the Go guard's, by policy.
	const char *says = " process(es) running; the lease stays held until they exit (--strays=wait): ";
	int done = 0, stop = 0;
	if (strcmp(opt.strays, "report") == 0)
		says = " process(es) running, released anyway (--strays=report): ", done = 1;
	else if (strcmp(opt.strays, "kill") == 0)
		says = " process(es) running; stopping them (--strays=kill): ", stop = 1;
	struct buf m = {0};
	puts_(&m, "baton: the command exited and left ");
	putint(&m, left.n);
	puts_(&m, says);
	describe(&m, &left);
	puts_(&m, "\n");
	writeall(2, m.b, m.n);
	free(m.b);
	if (stop) {
		signal_tree(SIGTERM);
		*grace = clock_ns(CLOCK_MONOTONIC) + opt.kill_after;
	}
	return done;
}

static void put_duration(struct buf *b, int64_t d) {
	// As Go's Duration.String for the whole seconds and milliseconds the
	// supervisor passes; anything else in nanoseconds' plain terms.
	if (d % 1000000000 == 0 && d < 60000000000LL) {
		putint(b, d / 1000000000);
		puts_(b, "s");
	} else if (d % 1000000 == 0 && d < 1000000000) {
		putint(b, d / 1000000);
		puts_(b, "ms");
	} else if (d >= 60000000000LL && d % 1000000000 == 0 && d < 3600000000000LL) {
		putint(b, d / 60000000000LL);
		puts_(b, "m");
		putint(b, d / 1000000000 % 60);
		puts_(b, "s");
	} else {
		char s[40];
		snprintf(s, sizeof s, "%gs", (double)d / 1e9);
		puts_(b, s);
	}
}

// supervise reaps every child until none is left, as the Go guard's
// supervise.
static void supervise(int sfd) {
	struct report res = {0};
	int64_t grace = -1;     // CLOCK_MONOTONIC deadline, -1: none yet
	int grace_fired = 0;    // the grace ran out once (it acts once)
	int trust_armed = trust_cell != NULL;
	for (;;) {
		int ws;
		pid_t pid;
		while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
			if (on_reaped(pid, ws, &res, &grace))
				finish(&res);
		}
		if (pid < 0 && errno == ECHILD)
			finish(&res); // the whole tree is gone
		// What to wait for: a signal (SIGCHLD among them), the grace, the
		// trust window's end.
		int64_t now = clock_ns(CLOCK_MONOTONIC), wait_ns = -1;
		if (grace >= 0 && !grace_fired) {
			if (grace <= now) {
				grace_fired = 1;
				signal_tree(SIGKILL);
				continue;
			}
			wait_ns = grace - now;
		}
		if (trust_armed) {
			int64_t left = __atomic_load_n(trust_cell, __ATOMIC_SEQ_CST) - boot_now();
			if (left <= 0) {
				trust_armed = 0;
				res.trust_expired = 1;
				struct buf m = {0};
				puts_(&m, "baton: no renewal of the lease reached the guard before its trust window ended; stopping the command's tree (TERM, KILL after ");
				put_duration(&m, opt.kill_after);
				puts_(&m, ")\n");
				writeall(2, m.b, m.n);
				free(m.b);
				signal_tree(SIGTERM);
				if (grace < 0)
					grace = clock_ns(CLOCK_MONOTONIC) + opt.kill_after;
				continue;
			}
			if (wait_ns < 0 || left < wait_ns)
				wait_ns = left;
		}
		struct pollfd p = {.fd = sfd, .events = POLLIN};
		struct timespec ts, *tsp = NULL;
		if (wait_ns >= 0) {
			ts.tv_sec = wait_ns / 1000000000;
			ts.tv_nsec = wait_ns % 1000000000;
			tsp = &ts;
		}
		int r = ppoll(&p, 1, tsp, NULL);
		if (r <= 0)
			continue; // a timeout, or EINTR: look again
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof si) == sizeof si) {
			int sig = si.ssi_signo;
			if (sig == SIGCHLD || sig == SIGPIPE)
				continue;
			if (sig == SIGUSR2) { // the supervisor is gone
				kill_tree();
			} else if (sig == SIGUSR1) { // stop the tree
				signal_tree(SIGTERM);
				if (grace < 0)
					grace = clock_ns(CLOCK_MONOTONIC) + opt.kill_after;
			} else {
				kill(-main_pid, sig);
			}
		}
	}
}

// spawn is what spawn_child needs; the child shares this process's memory
// until it execs, and this process waits until it has (CLONE_VFORK).
static struct {
	const char *path;
	char **argv, **envp;
	sigset_t mask;
	int self;
	volatile int err; // the exec's errno, when it failed
} spawn;
static char spawn_stack[64 * 1024] __attribute__((aligned(16)));

// spawn_child runs in the child, on its own stack: only system calls until
// the exec, as in a vfork child.
static int spawn_child(void *unused) {
	(void)unused;
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != spawn.self)
		kill(getpid(), SIGKILL); // the guard died meanwhile: Pdeathsig came too late
	sigprocmask(SIG_SETMASK, &spawn.mask, NULL);
	execve(spawn.path, spawn.argv, spawn.envp);
	spawn.err = errno;
	_exit(127);
}

// guard_first runs before the Go runtime starts (a constructor). It returns
// only when this process is not a guard or when it leaves the run to the
// Go guard; otherwise it exits.
__attribute__((constructor)) static void guard_first(int argc, char **argv, char **envp) {
	if (argc < 2 || strcmp(argv[1], "__guard") != 0)
		return;
	if (getenv("BATON_GUARD_GO") != NULL)
		return; // for tests: the Go guard, in a binary that has both
	if (!parse_args(argv + 2, &opt) || strcmp(opt.protocol, BATON_GUARD_PROTOCOL) != 0)
		return; // the Go guard says what is wrong
	if (strcmp(opt.strays, "wait") != 0 && strcmp(opt.strays, "kill") != 0 && strcmp(opt.strays, "report") != 0)
		return; // the Go guard treats it as wait; so would this, but it is no input of baton's

	struct report res = {0};
	fcntl(fd_result, F_SETFD, FD_CLOEXEC);
	fcntl(fd_lock, F_SETFD, FD_CLOEXEC); // EBADF when there is no lock: fine
	if (opt.trust) {
		fcntl(fd_trust, F_SETFD, FD_CLOEXEC);
		void *m = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd_trust, 0);
		if (m == MAP_FAILED) {
			fail(exit_internal, "cannot read the lease's trust window: mapping the trust cell: mmap", "", errno);
		}
		trust_cell = m;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
		fail(exit_internal, "cannot become a child subreaper", "", errno);
	}
	// Every signal the guard acts on is read from a signalfd; SIGPIPE is
	// held too, so that a write to a gone supervisor fails, not kills. The
	// command gets the mask this process started with.
	sigset_t set, old;
	sigemptyset(&set);
	int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
	for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		fail(exit_internal, "cannot read signals: signalfd", "", errno);
	}
	if (getppid() != opt.ppid) {
		res.exit_code = exit_internal;
		res.error = "supervisor gone before the command started";
		finish(&res);
	}
	// A supervisor frozen between taking the term and starting this guard
	// hands it a deadline already past: the command must not start at all.
	if (trust_cell != NULL && boot_now() >= __atomic_load_n(trust_cell, __ATOMIC_SEQ_CST)) {
		res.exit_code = exit_lease_lost;
		res.trust_expired = 1;
		res.error = "the lease's trust window ended before the command could start; not started";
		finish(&res);
	}

	// The command: its own process group, killed if this guard dies. It is
	// started as Go's os/exec starts one: a child that shares this
	// process's memory until it execs (CLONE_VM|CLONE_VFORK), so no page
	// table is copied and no page of this process faults on its next
	// write; the child tells an exec's failure through that memory.
	spawn.path = opt.path;
	spawn.argv = opt.argv;
	spawn.envp = envp;
	spawn.mask = old;
	spawn.self = getpid();
	pid_t pid = clone(spawn_child, spawn_stack + sizeof spawn_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	if (pid < 0) {
		fail(126, "cannot run ", opt.argv[0], errno); // as Go words a failed fork
	}
	if (spawn.err != 0) {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		fail(126, "cannot run ", opt.argv[0], spawn.err);
	}
	main_pid = pid;
	struct buf b = {0};
	put_report(&b, &(struct report){.started = pid});
	writeall(fd_result, b.b, b.n);
	free(b.b);
	supervise(sfd);
}
