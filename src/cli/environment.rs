/*!
The environment variables fsync sets for the commands it runs, and reads: the one table, rendered
into the ENVIRONMENT section of the man pages that concern each.
*/

/// (variable, the man pages it concerns (by name prefix), meaning).
pub(super) const TABLE: &[(&str, &[&str], &str)] = &[
    (
        "FSYNC_FENCE",
        &["fsync-mutex-run"],
        "set for COMMAND by 'mutex run': the fencing token of this holding, a decimal number \
         greater than that of every earlier holder of LOCK. A resource that remembers the \
         largest token it has seen can refuse a stale holder.",
    ),
    (
        "FSYNC_MUTEX_HELD",
        &["fsync-mutex-run"],
        "set for COMMAND by 'mutex run', and read by it: the locks held for this process tree, \
         as DEV:INO:FD:PID entries separated by ';' (FD is '-' under --close). A nested 'mutex \
         run' of a lock listed there runs at once, or fails with status 69 where waiting would \
         deadlock.",
    ),
    (
        "FSYNC_SLOT",
        &["fsync-sem-run", "fsync-grouplock-run"],
        "set for COMMAND by 'sem run' (and by 'grouplock run' under --max): the slot it holds, \
         0 to N-1, to pick one of N resources.",
    ),
    (
        "FSYNC_GROUP",
        &["fsync-grouplock-run"],
        "set for COMMAND by 'grouplock run': the name of the group it runs as.",
    ),
    (
        "FSYNC_GROUP_FIRST",
        &["fsync-group-join"],
        "set for COMMAND by 'group join': 1 if the group was empty when it joined (set-up is \
         its job), else 0.",
    ),
    (
        "PATH",
        &[
            "fsync-mutex-run",
            "fsync-group-join",
            "fsync-swmr-read",
            "fsync-swmr-write",
            "fsync-sem-run",
            "fsync-grouplock-run",
        ],
        "where COMMAND is looked up when its name has no '/', as the shell does; an executable \
         file without '#!' runs under /bin/sh.",
    ),
];
