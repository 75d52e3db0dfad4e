/*
 * baton.pml: the lease, tick and fence protocol of baton, as the code
 * implements it, for the Spin model checker. docs/MODEL.md says what is
 * modelled, what is abstracted away and why, how to run it, and what each
 * mutation (the -D macros below) finds. model_test.go runs it.
 *
 * Names follow the code: a variable named after a column (lease_until,
 * claim_until, fencing_token, lease_token_floor, epoch_seen, run_id) stands
 * for that column, a step named after a statement or function (LEASE_ACQUIRE
 * for postgres/sql/lease_acquire.sql, START_ATTEMPT for
 * scheduler/sql/start_attempt.sql, FENCE for baton.fence() of
 * postgres/sql/migrations/0002_fence.sql) does what it does. A change to one
 * shows where to change the other.
 *
 * Time. Every deadline is a countdown of model time units, so that the
 * state space is finite however long the system runs: lease_until is
 * "lease_until - clock_timestamp()", and a countdown at 0 has passed. The
 * store's clock ticks in clock(); each host's monotonic clock (the boot
 * clock of supervise/guard, guard.BootNow) ticks with it but may lag it by
 * up to DRIFT units at any moment (a rate difference, bounded over a TTL).
 * A process that is not frozen acts on a due timer before time passes
 * (URGENT); any delay of it is a freeze, and a freeze may last any time.
 */

/* ---- parameters (model units; docs/MODEL.md has the real values) ---- */
#ifndef TTL
#define TTL 5           /* the lease's TTL (baton.DefaultJobTTL is 30 s) */
#endif
#ifndef KILL_AFTER
#define KILL_AFTER 1    /* supervise.EffectiveKillAfter: min(kill-after, TTL/3) */
#endif
#ifndef SAFETY
#define SAFETY 2        /* supervise.Safety: max(TTL/10, 50ms) */
#endif
#ifndef DRIFT
#define DRIFT 1         /* how far a host's clock may fall behind the store's over a TTL */
#endif
#ifndef GUARD_WAIT
#define GUARD_WAIT 0    /* supervise.run: the supervisor KILLs a stuck guard's tree itself killAfter after sigStopTree (0; it used to wait 1 s more) */
#endif
#ifndef CLAIM_TTL
#define CLAIM_TTL 2     /* scheduler.Daemon.ClaimTTL */
#endif
#ifndef RETRIES
#define RETRIES 1       /* the job's retries: count */
#endif
#ifndef FAULTS
#define FAULTS 2        /* store calls that fail or whose reply is lost */
#endif
#ifndef FREEZES
#define FREEZES 2       /* freezes (of a supervisor, a guard, a command, or a whole host) */
#endif
#ifndef CUTS
#define CUTS 1          /* a daemon cut off from the store for a while (its calls fail) */
#endif
#ifndef FAILOVERS
#define FAILOVERS 1     /* failovers to an asynchronous standby */
#endif
#ifndef DELETES
#define DELETES 1       /* an operator deletes the job's expired lease row */
#endif
#define RENEW_EVERY (TTL / 3) /* supervise.run's interval */
#define EPOCH_BASE 16   /* token = epoch << 32 | counter (postgres.EpochBits), scaled down */
#define MAXG 14         /* grants the model follows (tokens stay below EPOCH_BASE in an epoch); asserted */

/* supervise.run's trustUntil(sent) = sent + TTL - killAfter - Safety(TTL) */
#ifdef TRUST_NO_MARGIN
#define TRUST_WINDOW TTL
#else
#define TRUST_WINDOW (TTL - KILL_AFTER - SAFETY)
#endif
/* lease_acquire.sql: no lease for one TTL after an acquisition first sees a new epoch */
#ifdef NO_EPOCH_HOLD
#define HOLD 0
#else
#define HOLD TTL
#endif

mtype = { PENDING, RUNNING, DONE };                                   /* ticks.state */
mtype = { NONE, SUCCEEDED, FAILED, LOST_LEASE, FENCED, SKIPPED_OVERLAP, KILLED }; /* outcomes, and how a command ended */
mtype = { OK, FAIL, LOST };     /* a store call: answered; failed, not done; done, its reply lost */
mtype = { IDLE, SPAWNED, ALIVE, EXITED };                             /* the guard and its command */
mtype = { SUP_IDLE, SUP_RUN, SUP_STOP };                              /* supervise.run's loop */

/* ---- the store, PostgreSQL's primary ---- */
/* job_leases (0001_job_leases.sql), one job */
bool  lease_row;              /* the job's row exists */
byte  lease_owner;            /* the term's owner uuid: here its grant's serial */
byte  fencing_token;
byte  lease_until;            /* countdown */
byte  lease_token_floor;      /* lease_token_floor.fencing_token (0007) */
/* token_epoch (0011): the server's epoch (timeline - 1 + epoch_offset) and
 * what acquisitions saw of it */
byte  epoch;
byte  epoch_seen;
byte  held_back_until;        /* countdown: epoch_seen_at + ttl */
/* ticks (0004_schedule.sql), one tick of the job */
mtype tick_state = PENDING;
byte  claimed_by;             /* daemon i+1; 0 none */
byte  claim_until;            /* countdown */
byte  run_id;                 /* the current attempt's term (its grant's serial); 0: none yet */
byte  attempts;
mtype outcome = NONE;
byte  nout;                   /* ghost: outcomes written to the tick since it was open */
bool  decided;                /* ghost: the tick was ended (done) and the store keeps it */

/* ---- the standby: the primary as of some earlier commit (asynchronous) ---- */
bool  rep_lease_row; byte rep_lease_owner; byte rep_fencing_token; byte rep_lease_until;
byte  rep_lease_token_floor; byte rep_epoch_seen; byte rep_held_back_until;
mtype rep_tick_state = PENDING; byte rep_claimed_by; byte rep_claim_until; byte rep_run_id;
byte  rep_attempts; mtype rep_outcome = NONE; byte rep_nout; bool rep_decided;

/* ---- the fenced result store: the fence table's high-water mark (0002_fence.sql) ---- */
byte  fence_token;            /* fence.token of the job's resource */
byte  fence_serial;           /* ghost: the grant serial of the term that wrote it */

/* ---- ghosts ---- */
byte  last_token;             /* the highest token ever granted, lost or not */
byte  gserial;                /* grants so far, in real order */
byte  nstarts;                /* commands of the tick started */
byte  failovers_done;

/* ---- each daemon's host: supervisor (the daemon), guard, command ---- */
byte  lag[2];                 /* the host's clock behind the store's, 0..DRIFT */
bool  fz_sup[2], fz_guard[2], fz_cmd[2]; /* frozen (SIGSTOP, a GC pause, a VM freeze) */
bool  cut[2];                 /* the daemon is cut off from the store (a partition) */
bool  both_frozen[2];         /* supervisor and guard were frozen at once during this run */
byte  trust_cell[2];          /* countdown: supervise/trust.go's cell, guard.TrustCell */
byte  pend[2];                /* countdown: trustUntil(sent) of the request in flight */
byte  kill_left[2];           /* countdown: the guard's grace, TERM then KILL */
byte  stuck_left[2];          /* countdown: supervise.run's wait for a stuck guard */
mtype tree[2] = IDLE;
bool  cmd_alive[2], wrote[2];
bool  term_sent[2], stop_req[2], trust_expired[2];
mtype exit_how[2] = NONE;
byte  cmd_token[2], cmd_serial[2]; /* BATON_FENCING_TOKEN, and its grant's serial */
mtype sup[2] = SUP_IDLE;
bool  inhand[2];              /* the daemon works on the tick (Daemon.heldTicks) */

byte  faults = FAULTS;
byte  freezes = FREEZES;
byte  cuts = CUTS;
byte  failovers = FAILOVERS;
byte  deletes = DELETES;

#define dec(x) x = (x > 0 -> x - 1 : 0)
#define max(a, b) (a > b -> a : b)

/* A store call's fate. */
#define CALL(r) \
	if \
	:: cut[i] -> r = FAIL; printf("MSG:   (daemon %d is cut off from the store: that call fails)\n", i) \
	:: !cut[i] -> r = OK \
	:: !cut[i] && faults > 0 -> faults--; r = FAIL; printf("MSG:   (that store call fails)\n") \
	:: !cut[i] && faults > 0 -> faults--; r = LOST; printf("MSG:   (that store call's reply is lost)\n") \
	fi

/* Never two commands of the job running at once, except a command whose
 * supervisor and guard were both frozen (a frozen host): nothing of baton's
 * can stop it, and the fence refuses its writes (FENCE). */
#define EXCLUSIVE (!(cmd_alive[0] && cmd_alive[1]) || both_frozen[0] || both_frozen[1])

/* ---- the statements ---- */

/* postgres/sql/lease_acquire.sql (Leaser.Acquire): held back for one TTL
 * after the first acquisition that sees a new epoch; else insert, or take
 * over an expired row, with greatest(row's token, floor, epoch << 32) + 1.
 * The lease table's trigger (0014_lease_token_rises) asserts the same rule. */
#define LEASE_ACQUIRE(i) \
	granted = false; held = false; \
	if \
	:: epoch > epoch_seen -> epoch_seen = epoch; held_back_until = HOLD \
	:: else \
	fi; \
	if \
	:: held_back_until > 0 -> held = true; printf("MSG: daemon %d: lease held back after a new epoch\n", i) \
	:: else -> \
		if \
		:: !lease_row || lease_until == 0 -> \
			assert(gserial < MAXG); /* the model's bound, never reached: not a silent limit */ \
			tok = max(lease_token_floor, epoch * EPOCH_BASE); \
			if \
			:: lease_row -> tok = max(tok, fencing_token) \
			:: else \
			fi; \
			tok++; \
			assert(tok > last_token); /* tokens of a job strictly increase across every grant */ \
			last_token = tok; gserial++; me = gserial; \
			lease_row = true; lease_owner = me; fencing_token = tok; lease_until = TTL; \
			granted = true; \
			printf("MSG: daemon %d acquires the lease: token %d (grant %d)\n", i, tok, me) \
		:: else /* busy */ \
		fi \
	fi

/* postgres/sql/lease_renew.sql (Leaser.Renew): the exact term, unexpired. */
#define LEASE_RENEW(i) \
	renewed = (lease_row && lease_owner == me && fencing_token == tok && lease_until > 0); \
	if \
	:: renewed -> lease_until = TTL; printf("MSG: daemon %d renews token %d\n", i, tok) \
	:: else \
	fi

/* postgres/sql/lease_release.sql (Leaser.Release): the exact term, now. */
#define LEASE_RELEASE(i) \
	if \
	:: lease_row && lease_owner == me && fencing_token == tok && lease_until > 0 -> lease_until = 0; \
		printf("MSG: daemon %d releases token %d\n", i, tok) \
	:: else \
	fi

/* scheduler/sql/start_attempt.sql (Store.StartAttempt): compare-and-set on
 * the previous attempt's run id. */
#ifdef START_NO_CAS
#define START_MATCH true
#else
#define START_MATCH (run_id == prev && tick_state != DONE)
#endif
#define START_ATTEMPT(i) \
	started = START_MATCH; \
	if \
	:: started -> \
		assert(!decided); /* a tick is never started again once it has ended */ \
		tick_state = RUNNING; attempts++; run_id = me; att = attempts; \
		printf("MSG: daemon %d starts attempt %d (run %d)\n", i, att, me) \
	:: else \
	fi

/* scheduler/sql/finish_tick.sql (Store.Finish): only the current attempt,
 * only an open tick; done with its one outcome, or pending for a retry. */
#ifdef FINISH_NO_CAS
#define FINISH_MATCH(run) true
#else
#define FINISH_MATCH(run) (run_id == run && tick_state != DONE)
#endif
#define FINISH(run, o, retry) \
	fok = FINISH_MATCH(run); \
	if \
	:: fok && !(retry) -> \
		tick_state = DONE; outcome = o; nout++; decided = true; \
		printf("MSG: daemon %d ends the tick: %e (run %d)\n", i, o, run) ; \
		assert(nout == 1) /* every tick ends in exactly one outcome */ \
	:: fok && (retry) -> tick_state = PENDING; printf("MSG: daemon %d: attempt ended %e, to be retried\n", i, o) \
	:: else \
	fi

/* baton.fence(resource, token) (0002_fence.sql) in the result store. */
#ifdef NO_FENCE
#define FENCE_PASSES true
#else
#define FENCE_PASSES (cmd_token[i] >= fence_token)
#endif

/* A failover loses the commits the standby had not received, and starts a
 * new timeline: the epoch rises (0011_token_epoch, token_base()). */
#ifdef NO_EPOCH
#define NEW_EPOCH skip
#else
#define NEW_EPOCH epoch++
#endif

#define REPLICATE \
	rep_lease_row = lease_row; rep_lease_owner = lease_owner; rep_fencing_token = fencing_token; \
	rep_lease_until = lease_until; rep_lease_token_floor = lease_token_floor; \
	rep_epoch_seen = epoch_seen; rep_held_back_until = held_back_until; \
	rep_tick_state = tick_state; rep_claimed_by = claimed_by; rep_claim_until = claim_until; \
	rep_run_id = run_id; rep_attempts = attempts; rep_outcome = outcome; rep_nout = nout; \
	rep_decided = decided

#define PROMOTE \
	lease_row = rep_lease_row; lease_owner = rep_lease_owner; fencing_token = rep_fencing_token; \
	lease_until = rep_lease_until; lease_token_floor = rep_lease_token_floor; \
	epoch_seen = rep_epoch_seen; held_back_until = rep_held_back_until; \
	tick_state = rep_tick_state; claimed_by = rep_claimed_by; claim_until = rep_claim_until; \
	run_id = rep_run_id; attempts = rep_attempts; outcome = rep_outcome; nout = rep_nout; \
	decided = rep_decided

/* Timers due: no time passes until a process that is not frozen has acted
 * on them. */
#define URGENT(h) ( \
	(!fz_guard[h] && cmd_alive[h] && !term_sent[h] && trust_cell[h] == 0) || \
	(!fz_guard[h] && cmd_alive[h] && term_sent[h] && kill_left[h] == 0) || \
	(!fz_sup[h] && sup[h] == SUP_RUN && trust_cell[h] == 0) || \
	(!fz_sup[h] && sup[h] == SUP_STOP && tree[h] != EXITED && stuck_left[h] == 0))
#define HOST_TIMERS(h) (trust_cell[h] > 0 || pend[h] > 0 || kill_left[h] > 0 || stuck_left[h] > 0)
#define TIMERS (lease_until > 0 || held_back_until > 0 || claim_until > 0 || \
	rep_lease_until > 0 || rep_held_back_until > 0 || rep_claim_until > 0 || \
	HOST_TIMERS(0) || HOST_TIMERS(1))
#define HOST_TICK(h) dec(trust_cell[h]); dec(pend[h]); dec(kill_left[h]); dec(stuck_left[h])

/* Daemon.heartbeat: Store.RenewHeld (scheduler/sql/postgres/renew_held.sql)
 * extends the claims of the ticks a daemon works on (in hand) while the
 * daemon is not frozen; modelled as prompt (a late heartbeat is a freeze).
 * With RENEW_ALL_CLAIMS, renew_claims.sql: every open tick claimed in its
 * name, in hand or not. */
#ifdef RENEW_ALL_CLAIMS
#define HELD(i) true
#else
#define HELD(i) inhand[i]
#endif
#define RENEW_HELD \
	if \
	:: tick_state != DONE && claimed_by == 1 && HELD(0) && !fz_sup[0] && !cut[0] -> claim_until = CLAIM_TTL \
	:: tick_state != DONE && claimed_by == 2 && HELD(1) && !fz_sup[1] && !cut[1] -> claim_until = CLAIM_TTL \
	:: else -> dec(claim_until) \
	fi

/* The store's clock (clock_timestamp()) and the hosts' monotonic clocks. */
proctype clock() {
end:
	do
	:: atomic { !URGENT(0) && !URGENT(1) && TIMERS ->
		printf("MSG: . time passes (lease %d left)\n", lease_until);
		dec(lease_until); dec(held_back_until); RENEW_HELD;
		dec(rep_lease_until); dec(rep_held_back_until); dec(rep_claim_until);
		if
		:: lag[0] < DRIFT -> lag[0]++
		:: HOST_TICK(0)
		fi;
		if
		:: lag[1] < DRIFT -> lag[1]++
		:: HOST_TICK(1)
		fi }
	:: atomic { lag[0] > 0 && !URGENT(0) -> lag[0]--; HOST_TICK(0) }
	:: atomic { lag[1] > 0 && !URGENT(1) -> lag[1]--; HOST_TICK(1) }
	od
}

/* Faults from outside: replication, failover, an operator's delete, freezes. */
proctype env() {
	byte h;
end:
	do
	:: atomic { failovers > 0 -> REPLICATE }   /* the standby receives the commits so far */
	:: atomic { failovers > 0 -> failovers--; failovers_done++; PROMOTE; NEW_EPOCH;
		printf("MSG: failover: the standby is promoted, the last commits are lost; epoch %d\n", epoch);
		/* the standby is gone: forget it */
		rep_lease_row = false; rep_lease_owner = 0; rep_fencing_token = 0; rep_lease_until = 0;
		rep_lease_token_floor = 0; rep_epoch_seen = 0; rep_held_back_until = 0;
		rep_tick_state = PENDING; rep_claimed_by = 0; rep_claim_until = 0; rep_run_id = 0;
		rep_attempts = 0; rep_outcome = NONE; rep_nout = 0; rep_decided = false }
	:: atomic { deletes > 0 && lease_row && lease_until == 0 -> deletes--;
		/* job_leases_after_delete (0007) raises the floor */
		lease_row = false; printf("MSG: an operator deletes the expired lease row (token %d)\n", fencing_token);
#ifndef NO_FLOOR
		lease_token_floor = max(lease_token_floor, fencing_token)
#endif
		}
	:: atomic { cuts > 0 -> cuts--; cut[0] = true; printf("MSG: daemon 0 is cut off from the store\n") }
	:: atomic { freezes > 0 -> freezes--;
		/* host 0 only: the model is symmetric in its daemons. A command
		 * frozen alone is a slow command, which it is anyway. */
		h = 0;
		if
		:: fz_sup[h] = true                               /* the daemon (supervisor) */
		:: fz_guard[h] = true                             /* the guard */
		:: fz_sup[h] = true; fz_guard[h] = true; fz_cmd[h] = true /* the whole host */
		fi;
		both_frozen[h] = both_frozen[h] || (fz_sup[h] && fz_guard[h]);
		printf("MSG: freeze on host %d: supervisor %d guard %d command %d\n", h, fz_sup[h], fz_guard[h], fz_cmd[h]) }
	od
}

/* Every freeze ends, after any time. */
proctype thaw() {
end:
	do
	:: atomic { cut[0] -> cut[0] = false; printf("MSG: daemon 0 reaches the store again\n") }
	:: atomic { fz_sup[0] -> fz_sup[0] = false; printf("MSG: supervisor 0 thaws\n") }
	:: atomic { fz_guard[0] -> fz_guard[0] = false; printf("MSG: guard 0 thaws\n") }
	:: atomic { fz_cmd[0] -> fz_cmd[0] = false; printf("MSG: command 0 thaws\n") }
	:: atomic { fz_sup[1] -> fz_sup[1] = false; printf("MSG: supervisor 1 thaws\n") }
	:: atomic { fz_guard[1] -> fz_guard[1] = false; printf("MSG: guard 1 thaws\n") }
	:: atomic { fz_cmd[1] -> fz_cmd[1] = false; printf("MSG: command 1 thaws\n") }
	od
}

/* The guard (supervise/guard, GuardMain) and the command below it. */
proctype guard(byte i) {
end:
	do
	/* guard.go: a deadline already past when the guard starts: not started */
	:: atomic { tree[i] == SPAWNED && !fz_guard[i] ->
		if
		:: trust_cell[i] == 0 -> tree[i] = EXITED; exit_how[i] = KILLED; trust_expired[i] = true
		:: else -> tree[i] = ALIVE; cmd_alive[i] = true; nstarts++;
			printf("MSG: command %d starts with token %d\n", i, cmd_token[i]);
			assert(EXCLUSIVE);
			/* a tick never starts twice, except its documented retries, and a
			 * run again after a failover lost its record (docs/FAILOVER.md) */
			assert(nstarts <= (1 + RETRIES) * (1 + failovers_done))
		fi }
	/* the command writes its result through the fence */
	/* once per run: a later write with the same token meets the same
	 * fence, and a single write may come at any moment */
	:: atomic { cmd_alive[i] && !fz_cmd[i] && !wrote[i] -> wrote[i] = true;
		if
		:: FENCE_PASSES ->
			assert(cmd_token[i] >= fence_token);   /* never below the highest accepted */
			assert(cmd_serial[i] >= fence_serial); /* never an older term's write after a newer's */
			fence_token = cmd_token[i]; fence_serial = cmd_serial[i];
			printf("MSG: command %d writes with token %d: accepted\n", i, cmd_token[i])
		:: else -> cmd_alive[i] = false; exit_how[i] = FENCED; /* BF001: exit 77 */
			printf("MSG: command %d writes with token %d: fenced, exits 77\n", i, cmd_token[i])
		fi }
	/* the command exits by itself, or on TERM */
	:: atomic { cmd_alive[i] && !fz_cmd[i] -> cmd_alive[i] = false;
		if
		:: term_sent[i] -> exit_how[i] = KILLED
		:: !term_sent[i] -> exit_how[i] = SUCCEEDED
#ifndef COMMAND_SUCCEEDS
		:: !term_sent[i] -> exit_how[i] = FAILED
#endif
		fi;
		printf("MSG: command %d exits: %e\n", i, exit_how[i]) }
	/* guard.supervise: the trust window ends (<-trustC), or the supervisor
	 * asks (SigStopTree): TERM the tree, KILL after the grace */
	:: atomic { !fz_guard[i] && cmd_alive[i] && !term_sent[i] && (trust_cell[i] == 0 || stop_req[i]) ->
		term_sent[i] = true; kill_left[i] = KILL_AFTER;
		printf("MSG: guard %d sends TERM (trust left %d, asked %d)\n", i, trust_cell[i], stop_req[i]);
		trust_expired[i] = trust_expired[i] || trust_cell[i] == 0 }
	:: atomic { !fz_guard[i] && cmd_alive[i] && term_sent[i] && kill_left[i] == 0 ->
		cmd_alive[i] = false; exit_how[i] = KILLED;   /* SIGKILL reaches a stopped process too */
		printf("MSG: guard %d KILLs command %d\n", i, i) }
	/* the tree is gone: the guard reports */
	:: atomic { !fz_guard[i] && tree[i] == ALIVE && !cmd_alive[i] -> tree[i] = EXITED }
	od
}

/* A daemon: Daemon.claim, then Daemon.handle (scheduler/execute.go) with
 * supervise.Supervisor.run (supervise/supervise.go) and Daemon.record
 * (scheduler/record.go). */
proctype daemon(byte i) {
	byte prev, att, tok, me, from;
	mtype r, st, ending;
	bool wait, takeover, granted, held, renewed, started, fok, lost, retry, renewing;

claim:
	skip;
	/* dead values forgotten, so that equal situations are one state */
	d_step { inhand[i] = false; prev = 0; att = 0; tok = 0; me = 0; from = 0; r = NONE; st = NONE; ending = NONE;
		wait = false; takeover = false; granted = false; held = false; renewed = false;
		started = false; fok = false; lost = false; retry = false; renewing = false;
		pend[i] = 0; trust_cell[i] = 0; cmd_token[i] = 0; cmd_serial[i] = 0; exit_how[i] = NONE;
		trust_expired[i] = false; both_frozen[i] = false; tree[i] = IDLE }
end_claim:
	do
	/* claim_ticks.sql: an open tick whose claim has lapsed */
	:: atomic { !fz_sup[i] && tick_state != DONE &&
#ifdef TAKEOVER_EARLY
		claimed_by != i + 1 &&
#else
		claim_until == 0 &&
#endif
		true ->
		CALL(r);
		if
		:: r != FAIL -> claimed_by = i + 1; claim_until = CLAIM_TTL
		:: else
		fi;
		if
		:: r == OK -> prev = run_id; att = attempts; st = tick_state; inhand[i] = true;
			printf("MSG: daemon %d claims the tick (%e, attempts %d)\n", i, st, att); break
		:: else /* the answer is lost: not in hand, so not renewed; it lapses */
		fi }
	od;
	wait = (st != PENDING || att > 0);
	takeover = (st == RUNNING);

acquire:
	/* Daemon.acquireTerm: *sent = time.Now(), then lease_acquire.sql */
	atomic { !fz_sup[i] ->
		pend[i] = TRUST_WINDOW;
		CALL(r);
		if
		:: r != FAIL -> LEASE_ACQUIRE(i)
		:: else -> granted = false; held = false
		fi }
	/* its answer */
	atomic { !fz_sup[i] ->
#ifdef TRUST_FROM_REPLY
		pend[i] = TRUST_WINDOW;
#endif
		if
		:: r == OK && granted -> skip
		:: r == OK && !granted && !held && !wait -> r = NONE   /* busy: the overlap policy (skip) */
		:: else -> r = FAIL   /* busy and waiting, held back (EUNAVAILABLE), or an error: again */
		fi;
		if :: r != OK -> pend[i] = 0 :: else fi }
	if
	:: r == NONE ->
		/* Daemon.end: skipped-overlap */
		atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> FINISH(prev, SKIPPED_OVERLAP, false) :: else fi }
		goto claim
	:: r == FAIL -> goto acquire
	:: r == OK
	fi;

	/* handle: the lease is ours, so a taken-over attempt is over */
	if
	:: takeover ->
		takeover = false;
		if
		:: att > RETRIES ->
			atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> FINISH(prev, LOST_LEASE, false) :: else fi }
			atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> LEASE_RELEASE(i) :: else fi }
			goto claim
		:: else ->
			atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> FINISH(prev, LOST_LEASE, true) :: else fi }
		fi
	:: else
	fi;

	/* Daemon.startAttempt */
	atomic { !fz_sup[i] -> CALL(r); started = false; if :: r != FAIL -> START_ATTEMPT(i) :: else fi }
	if
	:: r != OK ->   /* cannot record the attempt's start; not running it yet */
		atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> LEASE_RELEASE(i) :: else fi }
		goto acquire
	:: r == OK && !started ->   /* ended or taken over elsewhere */
		atomic { !fz_sup[i] -> CALL(r); if :: r != FAIL -> LEASE_RELEASE(i) :: else fi }
		goto claim
	:: r == OK && started
	fi;
	from = prev; prev = me;

	/* supervise.run: trust runs from the acquisition's request (sent) */
	atomic { !fz_sup[i] ->
		trust_cell[i] = pend[i]; pend[i] = 0; cmd_token[i] = tok; cmd_serial[i] = me;
		term_sent[i] = false; stop_req[i] = false; trust_expired[i] = false; exit_how[i] = NONE; wrote[i] = false;
		both_frozen[i] = fz_sup[i] && fz_guard[i];
		lost = false; renewing = false;
		sup[i] = SUP_RUN; tree[i] = SPAWNED }
	/* Go's select takes any ready case; a run whose tree has exited
	 * sends no more renewals (weak fairness is per process, not per case) */
	do
	:: atomic { tree[i] == EXITED -> break }                          /* <-exited */
	:: atomic { !fz_sup[i] && trust_cell[i] == 0 -> lost = true; /* <-stopAt.C */
		printf("MSG: supervisor %d: trust window over, stopping the tree\n", i); break }
	/* <-renewAt.C: lease_renew.sql, a third of a TTL after the last renewal sent */
	:: atomic { !fz_sup[i] && !renewing && trust_cell[i] + RENEW_EVERY <= TRUST_WINDOW && tree[i] != EXITED ->
		pend[i] = TRUST_WINDOW; CALL(r); renewed = false;
		if :: r != FAIL -> LEASE_RENEW(i) :: else fi;
		renewing = true }
	:: atomic { !fz_sup[i] && renewing -> renewing = false;
		if
		:: r == OK && renewed -> trust_cell[i] = pend[i] /* stopAt.Reset, trust.set(trustUntil(lastSent)) */
		:: r == OK && !renewed -> lost = true; break    /* ELEASELOST */
		:: else                                         /* failing: retried */
		fi;
		pend[i] = 0 }
	od;
	if
	:: tree[i] != EXITED ->
		/* trust is gone: the guard stops the whole tree (sigStopTree) */
#ifdef RELEASE_BEFORE_EXIT
		atomic { CALL(r); if :: r != FAIL -> LEASE_RELEASE(i) :: else fi }
#endif
		atomic { stop_req[i] = true; stuck_left[i] = KILL_AFTER + GUARD_WAIT; sup[i] = SUP_STOP }
		do
		:: atomic { tree[i] == EXITED -> break }
		/* the guard is stuck: the supervisor KILLs the tree (and the guard) */
		:: atomic { !fz_sup[i] && stuck_left[i] == 0 && tree[i] != EXITED ->
			cmd_alive[i] = false; tree[i] = EXITED; exit_how[i] = KILLED;
			printf("MSG: supervisor %d KILLs its stuck guard\n", i); break }
		od
	:: else
	fi;
	skip;
	d_step { sup[i] = SUP_IDLE; trust_cell[i] = 0; kill_left[i] = 0; stuck_left[i] = 0; pend[i] = 0;
		stop_req[i] = false; term_sent[i] = false; renewing = false; renewed = false }

	/* scheduler.Daemon.run: the ending */
	if
	:: lost || trust_expired[i] -> ending = LOST_LEASE
	:: else -> ending = (exit_how[i] == KILLED -> FAILED : exit_how[i])
	fi;
	retry = (ending != SUCCEEDED && ending != FENCED && att <= RETRIES);

record:
	/* Daemon.record: the ending, then the release, in one call; retried
	 * while the daemon holds the tick's claim */
	atomic { !fz_sup[i] -> CALL(r);
		if
		:: r != FAIL -> FINISH(me, ending, retry); LEASE_RELEASE(i)
		:: else
		fi }
	if
	:: r != OK ->
#ifdef NO_RECORD_RETRY
		goto claim;
#endif
		goto record
	:: else
	fi;
	if
	:: !fok ->
		/* recordLostStart: the store lost the attempt's start (a failover) */
		atomic { !fz_sup[i] -> CALL(r);
			if
			:: r != FAIL -> prev = from; START_ATTEMPT(i);
				if
				:: started -> FINISH(me, ending, retry)
				:: else -> fok = false
				fi;
				prev = me
			:: else -> fok = false
			fi;
			fok = fok && r == OK }
	:: else
	fi;
	if
	:: fok && retry -> wait = true; goto acquire   /* retrying after the backoff */
	:: else -> goto claim
	fi
}

init {
	atomic {
		run clock(); run env(); run thaw();
		run guard(0); run guard(1);
		run daemon(0); run daemon(1)
	}
}

#ifdef LIVENESS
/* Every tick ends in exactly one outcome, eventually and for good. */
ltl ends { <>[] (tick_state == DONE) }
#endif
