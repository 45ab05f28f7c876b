# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_fsync_global_optspecs
    string join \n h/help V/version
end

function __fish_fsync_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_fsync_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_fsync_using_subcommand
    set -l cmd (__fish_fsync_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c fsync -n "__fish_fsync_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_needs_command" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "mutex" -d 'Exclusive locks: run a command while holding a lock file'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "group" -d 'Pools of processes: join while a command runs; is the group empty?'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "event" -d 'Events: signal, wait (optionally auto-resetting), reset, status'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "msg" -d 'Mailboxes: durable and synchronous messages, received exactly once'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "bus" -d 'Message bus: named participants on a shared directory'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "swmr" -d 'Reader/writer locks that never starve the writer'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "sem" -d 'Counting semaphores: at most N holders at once, crash-safe'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "grouplock" -d 'Group locks: one group at a time, any number of its members'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "doctor" -d 'Check what PATH\'s file system supports and how fsync will wait there'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "flock" -d 'util-linux flock(1), exactly: run a command under a lock, as flock runs it'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "completions" -d 'Print the completion script for a shell'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "man" -d 'Write the manual pages, or print fsync(1)'
complete -c fsync -n "__fish_fsync_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "run" -d 'Run COMMAND while holding LOCK exclusively'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "lock" -d 'Lock a descriptor the calling shell already has open'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "unlock" -d 'Release the lock held through a descriptor'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "status" -d 'Tell whether LOCK is held (exit 1) or free (exit 0), and by whom'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "watch" -d 'Print whether LOCK is held, then a line each time it is acquired or released'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and not __fish_seen_subcommand_from run lock unlock status watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l range -d 'Lock only LEN bytes of LOCK from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all offsets; bytes past the end of the file are fine) with an OFD byte-range lock: disjoint ranges do not exclude each other. No holder record, fence or nesting' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l mode -d 'The permissions of LOCK if fsync creates it, less the umask (default 0666, as flock(1) creates it; octal, as chmod takes it): 0660 for a group\'s lock, 0666 under \'umask 0\' for every user\'s processes' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l when -d 'Enter only when CONDITION holds: a shell command (\'sh -c CONDITION\') run under the lock, exit status 0 meaning yes. Otherwise release LOCK, sleep until another holder has entered and left (kernel-woken; also every --poll on network file systems), and evaluate again. Its output goes where fsync\'s does; a CONDITION the shell cannot run (status 126 or 127) is an error. With -n: evaluate once' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s c -l command -d 'Run CMDSTRING with \'sh -c\' (as flock -c) instead of COMMAND' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l delete -d 'Remove LOCK (and its holder record) on release; racing acquirers never end up holding two different files of the same name. LOCK stays while a process COMMAND left running still holds the lock (-v says so)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s o -l close -d 'Do not pass the lock down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -l fcntl -d 'Lock the whole file with an fcntl (OFD) lock instead of flock(2), as fcntl-lock tools (s6-setlock, flock --fcntl) do: the same as --range 0:0'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s s -l shared -d 'Take a shared lock (as flock -s): shared holders run together, an exclusive one waits for all of them. No holder record, fence or nesting. Of -s and -x the last given wins'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s x -l exclusive -d 'Take an exclusive lock: the default (accepted as flock(1) takes it)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s u -l unlock -d 'flock -u: not an option of \'run\' (see \'fsync mutex unlock\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s F -l no-fork -d 'flock -F: not an option of \'run\' (fsync always waits for COMMAND)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -l fd -d 'The open file descriptor to lock' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -l range -d 'Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all offsets) with an OFD byte-range lock, as \'mutex run --range\' does: disjoint ranges do not exclude each other. An exclusive range needs N open for writing' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s s -l shared -d 'Take a shared lock instead of an exclusive one. Of -s and -x the last given wins'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s x -l exclusive -d 'Take an exclusive lock: the default (accepted as flock(1) takes it)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s u -l unlock -d 'flock -u N: not an option of \'lock\' (see \'fsync mutex unlock\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -l fcntl -d 'The whole file with an fcntl (OFD) lock instead of flock(2): the same as --range 0:0'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from lock" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from unlock" -l fd -d 'The open file descriptor to unlock' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from unlock" -l range -d 'Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all offsets) with an OFD byte-range lock, as \'mutex run --range\' does: disjoint ranges do not exclude each other. An exclusive range needs N open for writing' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from unlock" -l fcntl -d 'The whole file with an fcntl (OFD) lock instead of flock(2): the same as --range 0:0'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from unlock" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from unlock" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from status" -l range -d 'Tell about that byte range only (LEN 1 when absent, 0: to the end of all offsets): held if any byte-range lock is held on any of its bytes' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from status" -l json -d 'One JSON object: {"path", "state": "free"|"held", "holder", "fence", "fence_withheld", "record_trusted", "untrusted_record"}, with --range also "range" and "lock" ({"start", "len", "mode": "shared"|"exclusive"}). "fence" is null where the holder record is another user\'s, has other links, or names a holder the kernel contradicts, and "fence_withheld" says which ("another-user", "hard-links", "contradicted")'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from watch" -s t -l timeout -d 'Stop watching after DUR' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from watch" -l poll -d 'Re-check interval for changes made by tools other than fsync' -r
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from watch" -l json -d 'One JSON object per line: {"time", "event": "held"|"free"|"acquired"|"released", "path", "holder"}'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from watch" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run COMMAND while holding LOCK exclusively'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "lock" -d 'Lock a descriptor the calling shell already has open'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "unlock" -d 'Release the lock held through a descriptor'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "status" -d 'Tell whether LOCK is held (exit 1) or free (exit 0), and by whom'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Print whether LOCK is held, then a line each time it is acquired or released'
complete -c fsync -n "__fish_fsync_using_subcommand mutex; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "join" -d 'Be a member of GROUP while COMMAND runs'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "empty" -d 'Exit 0 if GROUP is empty, 1 if it has members'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "wait-empty" -d 'Wait until GROUP is empty'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "members" -d 'List the live members of GROUP'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "watch" -d 'Print \'empty\' / \'not-empty\' each time GROUP changes'
complete -c fsync -n "__fish_fsync_using_subcommand group; and not __fish_seen_subcommand_from join empty wait-empty members watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -l last -d 'When this member is the last to leave, run CMDSTRING with \'sh -c\' before anyone can join again (clean-up: the mirror of FSYNC_GROUP_FIRST)' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -l delete -d 'Remove the group\'s files when the last member leaves (nothing from a directory the member may not change)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s o -l close -d 'Do not pass the membership down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from join" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from empty" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from empty" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from wait-empty" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from members" -l json -d 'One JSON object: {"path", "count", "members": [{"pid", "child_pid", "host", "command", "since"}]}'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from members" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from members" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from watch" -s t -l timeout -d 'Stop watching after DUR' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from watch" -l poll -d 'Re-check interval on network file systems' -r
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from watch" -l json -d 'One JSON object per line: {"time", "event": "empty"|"not-empty", "path"}'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from watch" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "join" -d 'Be a member of GROUP while COMMAND runs'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "empty" -d 'Exit 0 if GROUP is empty, 1 if it has members'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "wait-empty" -d 'Wait until GROUP is empty'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "members" -d 'List the live members of GROUP'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Print \'empty\' / \'not-empty\' each time GROUP changes'
complete -c fsync -n "__fish_fsync_using_subcommand group; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -f -a "signal" -d 'Set EVENT (exit 0 whether or not it was set already)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -f -a "wait" -d 'Wait until EVENT is set (exit 0), or the timeout (75)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -f -a "reset" -d 'Clear EVENT (exit 0 whether or not it was set)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -f -a "status" -d 'Exit 0 if EVENT is set, 1 if not'
complete -c fsync -n "__fish_fsync_using_subcommand event; and not __fish_seen_subcommand_from signal wait reset status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from signal" -l json -d 'One JSON object: {"path", "was_set"}, whether EVENT was set before'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from signal" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from signal" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -l reset -d 'Consume the event: one signal wakes exactly one --reset waiter'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from wait" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from reset" -l json -d 'One JSON object: {"path", "was_set"}, whether EVENT was set before'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from reset" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from reset" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from status" -l json -d 'One JSON object: {"path", "state": "set"|"unset"}'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from help" -f -a "signal" -d 'Set EVENT (exit 0 whether or not it was set already)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from help" -f -a "wait" -d 'Wait until EVENT is set (exit 0), or the timeout (75)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from help" -f -a "reset" -d 'Clear EVENT (exit 0 whether or not it was set)'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from help" -f -a "status" -d 'Exit 0 if EVENT is set, 1 if not'
complete -c fsync -n "__fish_fsync_using_subcommand event; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "send" -d 'Send a message and wait until a receiver has taken it'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "post" -d 'Queue a message durably and return at once'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "recv" -d 'Take the oldest message: write it out, or run COMMAND on it as a job'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "work" -d 'Run the mailbox\'s messages as jobs, with N workers'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "wait-empty" -d 'Wait until nothing is queued, delayed or being received'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "retry" -d 'Put dead letters back in the queue'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "status" -d 'Show where jobs are: queued, delayed, running, finished or dead'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "wait" -d 'Wait until jobs have finished, and tell how'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "cancel" -d 'Cancel jobs: remove queued ones, stop running ones'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "list" -d 'List the queued messages with their sizes and ages'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "log" -d 'Print a job\'s output, kept in the mailbox'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "watch" -d 'Show what a mailbox is doing: queued, running jobs, rate, until a signal'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and not __fish_seen_subcommand_from send post recv work wait-empty retry status wait cancel list log watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -l data -d 'The payload; without it, standard input is read to its end (binary-safe, any size)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -l mode -d 'Permissions of the payload file (octal, less the umask); the default keeps messages from users outside the owner\'s group' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s q -l quiet -d 'Print nothing on standard output (by default the message\'s id, once it is queued)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from send" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l data -d 'The payload; without it, standard input is read to its end (binary-safe, any size)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l mode -d 'Permissions of the payload file (octal, less the umask); the default keeps messages from users outside the owner\'s group' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l delay -d 'Deliver the message no sooner than DUR from now (it waits among the delayed messages that \'list\' shows; once due, it comes before those queued after it)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l key -d 'Do not queue the message while another posted with KEY is still queued, delayed or being received (exit 0 all the same; -v says which one): jobs that must not pile up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s p -l priority -d 'Priority level, 0 (the default) to 3: receivers take a message of a higher level before any of a lower one, and those of one level in the order they were posted' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l job-timeout -d 'Stop the job once it has run for DUR, whatever the worker\'s --job-timeout (TERM to its process group, KILL after the worker\'s --grace), a failed attempt' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s t -l timeout -d 'Give up after DUR if another process holds a lock this takes for a moment (in a directory others may write, they can hold it for ever): nothing is changed, exit 75 [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s E -l conflict-exit-code -d 'Exit status when it gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l lines -d 'Post one message per line of the input (the newline not included; a last line without one counts; an empty line is an empty message), all or none of them queued'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -l null -d 'Post one message per NUL-terminated record of the input (as `find -print0` writes), all or none of them queued'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s n -l no-wait -d 'Same as --timeout 0'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s v -l verbose -d 'Say what became of the message: its id, or the pending message with the same key'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s q -l quiet -d 'Print nothing on standard output (by default the message\'s id: with --key, the id of the pending message when it was not queued)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from post" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l retries -d 'With COMMAND: after N+1 failed attempts of a job, move its message to the dead letters' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l backoff -d 'With COMMAND: hold a failed job back before its next attempt: DUR after its first failure, twice as long after each one after, 5m at most (0: not at all); or BASE..MAX (1s..10m): BASE doubling up to MAX, each wait drawn at random within 20% either way so that jobs that failed together do not all come back at once [default: 1s]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l job-timeout -d 'With COMMAND: stop a job that has run for DUR (TERM to its process group, KILL after --grace), and count it a failed attempt ("timeout" in its history): the default for jobs posted without their own (\'post --job-timeout\') [default: no limit]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l grace -d 'With COMMAND: how long a job stopped for its timeout or cancelled (\'fsync msg cancel\') has after TERM before KILL, it and what it started' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l keep -d 'With COMMAND: keep the record of a finished job (\'status\', \'wait\') this long; 0: none' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l output -d 'Where each job\'s standard output and error go: kept in the mailbox (both in one file, in the order written: \'fsync msg log BOX ID\' shows it, on any host), also passed on to fsync\'s own (tee), or only that (inherit) [default: keep for \'msg work\', tee for \'msg recv\']' -r -f -a "keep\t'Kept in the mailbox only, for \'fsync msg log\' (the default of \'msg work\')'
tee\t'Kept in the mailbox, and written to fsync\'s own standard output and error too (the default of \'msg recv -- COMMAND\')'
inherit\t'Not kept: the job writes to fsync\'s own standard output and error'"
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -l output-limit -d 'Keep at most SIZE bytes of each job\'s output (512, 64k, 1M, 1G: powers of 1024): the last ones; once a job writes more, the older half of what is kept is dropped, so at least SIZE/2 of its last bytes are kept. 0: nothing [default: 1M]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from recv" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -s j -l jobs -d 'Run up to N jobs at once (1 to 64)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l retries -d 'After N+1 failed attempts of a job, move its message to the dead letters' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l backoff -d 'With COMMAND: hold a failed job back before its next attempt: DUR after its first failure, twice as long after each one after, 5m at most (0: not at all); or BASE..MAX (1s..10m): BASE doubling up to MAX, each wait drawn at random within 20% either way so that jobs that failed together do not all come back at once [default: 1s]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l job-timeout -d 'With COMMAND: stop a job that has run for DUR (TERM to its process group, KILL after --grace), and count it a failed attempt ("timeout" in its history): the default for jobs posted without their own (\'post --job-timeout\') [default: no limit]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l grace -d 'With COMMAND: how long a job stopped for its timeout or cancelled (\'fsync msg cancel\') has after TERM before KILL, it and what it started' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l keep -d 'Keep the record of a finished job (\'status\', \'wait\') this long; 0: none' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l output -d 'Where each job\'s standard output and error go: kept in the mailbox (both in one file, in the order written: \'fsync msg log BOX ID\' shows it, on any host), also passed on to fsync\'s own (tee), or only that (inherit) [default: keep for \'msg work\', tee for \'msg recv\']' -r -f -a "keep\t'Kept in the mailbox only, for \'fsync msg log\' (the default of \'msg work\')'
tee\t'Kept in the mailbox, and written to fsync\'s own standard output and error too (the default of \'msg recv -- COMMAND\')'
inherit\t'Not kept: the job writes to fsync\'s own standard output and error'"
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l output-limit -d 'Keep at most SIZE bytes of each job\'s output (512, 64k, 1M, 1G: powers of 1024): the last ones; once a job writes more, the older half of what is kept is dropped, so at least SIZE/2 of its last bytes are kept. 0: nothing [default: 1M]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -l until-empty -d 'Stop once nothing is queued, delayed or being received'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -s v -l verbose -d 'Say on stderr when each job starts and how it ended'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from work" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait-empty" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from retry" -s v -l verbose -d 'Say which were put back'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from retry" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from retry" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from status" -l json -d 'One JSON object per job and line: {"id", "state" ("queued", "delayed", "running", "succeeded", "cancelled", "dead", "unknown"), and as the state has them "since", "until", "host", "pid", "attempt", "failed", "lost", "started", "ended", "attempts"}'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -l json -d 'One JSON object per job and line: {"id", "state" ("queued", "delayed", "running", "succeeded", "cancelled", "dead", "unknown"), and as the state has them "since", "until", "host", "pid", "attempt", "failed", "lost", "started", "ended", "attempts"}'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from wait" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -l json -d 'One JSON object per job and line: {"id", "state" ("queued", "delayed", "running", "succeeded", "cancelled", "dead", "unknown"), and as the state has them "since", "until", "host", "pid", "attempt", "failed", "lost", "started", "ended", "attempts"}'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from cancel" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from list" -l json -d 'One JSON object: {"path", "messages": [{"id", "name", "size", "since", "sync", "priority", "failed", "lost"}], "running" (messages being received, each with the "host", "pid", "attempt" and "taken" time of its worker), "delayed" (messages, each with its "due" time), "dead" (dead letters, as messages), "count", "claimed" (being received), "skipped": [{"name", "reason"}] (entries receivers pass over)}'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from log" -l poll -d 'With --follow: re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from log" -s f -l follow -d 'Go on printing what the job writes while it is queued or running; stop once it is neither'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from log" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from log" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from watch" -s t -l timeout -d 'Stop watching after DUR' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from watch" -l poll -d 'Re-check interval on network file systems' -r
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from watch" -l json -d 'One JSON object per line per refresh: {"time", "path", "queued", "delayed", "dead", "running": [{"id", "host", "pid", "attempt", "since"}], "rate", "eta"}'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from watch" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "send" -d 'Send a message and wait until a receiver has taken it'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "post" -d 'Queue a message durably and return at once'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "recv" -d 'Take the oldest message: write it out, or run COMMAND on it as a job'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "work" -d 'Run the mailbox\'s messages as jobs, with N workers'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "wait-empty" -d 'Wait until nothing is queued, delayed or being received'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "retry" -d 'Put dead letters back in the queue'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show where jobs are: queued, delayed, running, finished or dead'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "wait" -d 'Wait until jobs have finished, and tell how'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancel jobs: remove queued ones, stop running ones'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the queued messages with their sizes and ages'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "log" -d 'Print a job\'s output, kept in the mailbox'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Show what a mailbox is doing: queued, running jobs, rate, until a signal'
complete -c fsync -n "__fish_fsync_using_subcommand msg; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "connect" -d 'Connect NAME to BUS, or hold it while COMMAND runs (--hold)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "disconnect" -d 'Disconnect NAME from BUS (its directory is hidden as .NAME)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "members" -d 'List the connected participants, held and stale ones marked'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "send" -d 'Send a message to one participant (an error if it is not connected, or stale)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "broadcast" -d 'Send one copy to every other connected participant (stale ones skipped)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "recv" -d 'Take the oldest message for NAME; payload to standard output'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and not __fish_seen_subcommand_from connect disconnect members send broadcast recv help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s c -l command -d 'Run CMDSTRING with \'sh -c\' instead of COMMAND (with --hold)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s t -l timeout -d 'Give up after DUR if another process holds a lock this takes for a moment (in a directory others may write, they can hold it for ever): nothing is changed, exit 75 [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s E -l conflict-exit-code -d 'Exit status when it gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -l hold -d 'Hold NAME while COMMAND runs: nobody else can connect or disconnect it meanwhile, and it is disconnected when COMMAND exits'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s o -l close -d 'Do not pass the hold down to COMMAND\'s processes (flock -o): NAME is held only while fsync lives'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s v -l verbose -d 'Say on stderr what happened: connected, connected already, taken over from a holder that died; with --hold, also the disconnection'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s n -l no-wait -d 'Same as --timeout 0'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from connect" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from disconnect" -s t -l timeout -d 'Give up after DUR if another process holds a lock this takes for a moment (in a directory others may write, they can hold it for ever): nothing is changed, exit 75 [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from disconnect" -s E -l conflict-exit-code -d 'Exit status when it gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from disconnect" -s n -l no-wait -d 'Same as --timeout 0'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from disconnect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from disconnect" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from members" -l json -d 'One JSON object: {"path", "count", "members": [{"name", "state", "holder", "pending"}]}'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from members" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from members" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -l from -d 'The sending participant (must be connected)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -l to -d 'The receiving participant (must be connected)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -l data -d 'The payload; without it, standard input is read to its end (binary-safe, any size)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -s t -l timeout -d 'Give up after DUR if another process holds a lock this takes for a moment (in a directory others may write, they can hold it for ever): nothing is changed, exit 75 [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -s E -l conflict-exit-code -d 'Exit status when it gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -s n -l no-wait -d 'Same as --timeout 0'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from send" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -l from -d 'The sending participant (must be connected; gets no copy)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -l data -d 'The payload; without it, standard input is read to its end (binary-safe, any size)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -s E -l conflict-exit-code -d 'Exit status when it gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -s t -l timeout -d 'Skip a receiver whose lock another process holds for longer than DUR (in a directory others may write, they can hold it for ever) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -s n -l no-wait -d 'Same as --timeout 0'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from broadcast" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -l json -d 'One JSON object {"from", "data"} (or "data_b64") instead of the raw payload'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from recv" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "connect" -d 'Connect NAME to BUS, or hold it while COMMAND runs (--hold)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "disconnect" -d 'Disconnect NAME from BUS (its directory is hidden as .NAME)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "members" -d 'List the connected participants, held and stale ones marked'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "send" -d 'Send a message to one participant (an error if it is not connected, or stale)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "broadcast" -d 'Send one copy to every other connected participant (stale ones skipped)'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "recv" -d 'Take the oldest message for NAME; payload to standard output'
complete -c fsync -n "__fish_fsync_using_subcommand bus; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -f -a "read" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -f -a "write" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -f -a "status" -d 'Show readers, writer and waiting writers; exit 0 if free, 1 if held'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and not __fish_seen_subcommand_from read write status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -l range -d 'Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all offsets) with OFD byte-range locks; disjoint ranges do not exclude each other' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -l delete -d 'Remove LOCK, .NAME.turnstile and .NAME.writers on leaving if nobody else is inside, waiting or arriving (else the last to leave with --delete does); processes that opened them just before notice and take new ones. Files stay while a process COMMAND left running still holds the lock (-v says so)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s o -l close -d 'Do not pass the lock down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from read" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -l range -d 'Lock only LEN bytes from START (decimal or 0x hex; LEN 1 if absent, 0 to the end of all offsets) with OFD byte-range locks; disjoint ranges do not exclude each other' -r
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -l delete -d 'Remove LOCK, .NAME.turnstile and .NAME.writers on leaving if nobody else is inside, waiting or arriving (else the last to leave with --delete does); processes that opened them just before notice and take new ones. Files stay while a process COMMAND left running still holds the lock (-v says so)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s o -l close -d 'Do not pass the lock down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from write" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from status" -l json -d 'One JSON object: {"path", "state": "free"|"read"|"write", "readers", "writer" (the holder), "waiting" (writers)}'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from help" -f -a "read" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from help" -f -a "write" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show readers, writer and waiting writers; exit 0 if free, 1 if held'
complete -c fsync -n "__fish_fsync_using_subcommand swmr; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and not __fish_seen_subcommand_from run status help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and not __fish_seen_subcommand_from run status help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and not __fish_seen_subcommand_from run status help" -f -a "run" -d 'Run COMMAND while holding one of N slots of SEM'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and not __fish_seen_subcommand_from run status help" -f -a "status" -d 'Show slots, holders and waiters; exit 0 if a slot is free, 1 if all are held'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and not __fish_seen_subcommand_from run status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -l slots -d 'How many may hold it at once (recorded when SEM is created; another N is taken once nobody holds a slot, and refused while anyone does)' -r
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -l delete -d 'Remove SEM on leaving if nobody else holds a slot or waits for one (else the last of them to leave with --delete does); runs that opened it just before notice and take the new one. SEM stays while a process COMMAND left running still holds the slot (-v says so)'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s o -l close -d 'Do not pass the slot down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from status" -l json -d 'One JSON object: {"path", "slots", "held": [{"slot", "holder", "record_trusted", "untrusted_record"}], "waiting"}'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run COMMAND while holding one of N slots of SEM'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show slots, holders and waiters; exit 0 if a slot is free, 1 if all are held'
complete -c fsync -n "__fish_fsync_using_subcommand sem; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and not __fish_seen_subcommand_from run status help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and not __fish_seen_subcommand_from run status help" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and not __fish_seen_subcommand_from run status help" -f -a "run" -d 'Run COMMAND inside LOCK as a member of group NAME'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and not __fish_seen_subcommand_from run status help" -f -a "status" -d 'Show which group is inside and how many wait; exit 0 if none is inside, 1 if one is'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and not __fish_seen_subcommand_from run status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l group -d 'The group this process belongs to' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l max -d 'At most M members of the group inside at once: the group\'s cap, set by the first --max given for it; members that omit --max run under it; another M is taken once no member of the group is inside, and refused while any is' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s t -s w -l timeout -l wait -d 'Give up after DUR (0, 250ms, 5s, 2m, 1h30m; a bare number is seconds) [default: wait for ever]' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s E -l conflict-exit-code -d 'Exit status when the wait gives up' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l poll -d 'Re-check interval where other hosts cannot wake us (network file systems)' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l on-lost -d 'On a network file system, what to do if the lock is lost while COMMAND runs (it is checked every second): stop COMMAND with TERM (KILL after 10s) or KILL and exit 76, or only say so' -r -f -a "term\t'Send TERM, then KILL after a grace period, and exit with status 76'
kill\t'Send KILL at once and exit with status 76'
ignore\t'Only say so on stderr; the command goes on'"
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l lease -d 'On a network file system, count the lock as lost (and act as --on-lost says) once it could not be confirmed with the file server for DUR: shorter than the time after which the server gives a silent host\'s locks away, so that COMMAND stops first. Default: read from the mount where it shows that time (GlusterFS\'s ping-timeout, NFSv4\'s lease time: half, less a second), else by file system (MooseFS 30s, NFSv3 30s, CephFS 14s, SMB 20s, others 10s; -v warns); \'fsync doctor\' prints it. At least 1s' -r
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s n -l no-wait -l nonblock -l nb -l nonblocking -d 'Do not wait: give up at once if it is not free (same as --timeout 0; with --timeout, as flock -n -w: no wait)'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s v -l verbose -d 'Say on stderr what the wait is for and who holds it, since when, if it has to wait; then how long it waited, whether it got it, gave up or was interrupted'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -l delete -d 'Remove LOCK on leaving if nobody else is inside, waiting or arriving (else the last of them to leave with --delete does); runs that opened it just before notice and take the new one. LOCK stays while a process COMMAND left running still holds the lock (-v says so)'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s o -l close -d 'Do not pass the lock down to COMMAND\'s processes (flock -o)'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from status" -l json -d 'One JSON object: {"path", "inside": [{"group", "count"}], "waiting"}'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run COMMAND inside LOCK as a member of group NAME'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show which group is inside and how many wait; exit 0 if none is inside, 1 if one is'
complete -c fsync -n "__fish_fsync_using_subcommand grouplock; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand doctor" -l json -d 'One JSON object with every check and the mode: {"path", "fs_type", "mount_type", "network", "flock", "byte_range", "flock_and_byte_range_collide", "rename", "link", "notify", "notify_interface", "mode", "lease", "warnings"}'
complete -c fsync -n "__fish_fsync_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s w -l timeout -l wait -d 'Wait at most SECS seconds (fractions allowed; 0 is -n)' -r
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s E -l conflict-exit-code -d 'Exit status when the lock is busy or the wait timed out [default: 1]' -r
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s c -l command -d 'Run CMDSTRING with $SHELL -c (/bin/sh if SHELL is unset); given after FILE' -r
complete -c fsync -n "__fish_fsync_using_subcommand flock" -l start -d 'The first byte of an fcntl lock (implies --fcntl)' -r
complete -c fsync -n "__fish_fsync_using_subcommand flock" -l length -d 'How many bytes an fcntl lock covers, 0 to the end of all offsets (implies --fcntl)' -r
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s s -l shared -d 'Get a shared lock'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s x -l exclusive -d 'Get an exclusive lock (the default)'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s u -l unlock -d 'Remove a lock (with NUMBER: release the lock held through descriptor N)'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s n -l nonblocking -l nb -d 'Fail (exit 1, or -E\'s status) rather than wait'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s o -l close -d 'Close the lock\'s descriptor before running COMMAND: COMMAND and what it leaves running do not hold the lock'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s F -l no-fork -d 'Run COMMAND in place of fsync (exec) instead of as a child'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -l fcntl -d 'Use an fcntl (OFD) lock rather than flock(2)'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -l verbose -d 'Say on standard output how long getting the lock took, and what is executed'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s h -l help -d 'Print help'
complete -c fsync -n "__fish_fsync_using_subcommand flock" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand completions" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fsync -n "__fish_fsync_using_subcommand man" -s V -l version -d 'Print version'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "mutex" -d 'Exclusive locks: run a command while holding a lock file'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "group" -d 'Pools of processes: join while a command runs; is the group empty?'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "event" -d 'Events: signal, wait (optionally auto-resetting), reset, status'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "msg" -d 'Mailboxes: durable and synchronous messages, received exactly once'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "bus" -d 'Message bus: named participants on a shared directory'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "swmr" -d 'Reader/writer locks that never starve the writer'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "sem" -d 'Counting semaphores: at most N holders at once, crash-safe'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "grouplock" -d 'Group locks: one group at a time, any number of its members'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "doctor" -d 'Check what PATH\'s file system supports and how fsync will wait there'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "flock" -d 'util-linux flock(1), exactly: run a command under a lock, as flock runs it'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "completions" -d 'Print the completion script for a shell'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "man" -d 'Write the manual pages, or print fsync(1)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and not __fish_seen_subcommand_from mutex group event msg bus swmr sem grouplock doctor flock completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from mutex" -f -a "run" -d 'Run COMMAND while holding LOCK exclusively'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from mutex" -f -a "lock" -d 'Lock a descriptor the calling shell already has open'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from mutex" -f -a "unlock" -d 'Release the lock held through a descriptor'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from mutex" -f -a "status" -d 'Tell whether LOCK is held (exit 1) or free (exit 0), and by whom'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from mutex" -f -a "watch" -d 'Print whether LOCK is held, then a line each time it is acquired or released'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from group" -f -a "join" -d 'Be a member of GROUP while COMMAND runs'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from group" -f -a "empty" -d 'Exit 0 if GROUP is empty, 1 if it has members'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from group" -f -a "wait-empty" -d 'Wait until GROUP is empty'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from group" -f -a "members" -d 'List the live members of GROUP'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from group" -f -a "watch" -d 'Print \'empty\' / \'not-empty\' each time GROUP changes'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from event" -f -a "signal" -d 'Set EVENT (exit 0 whether or not it was set already)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from event" -f -a "wait" -d 'Wait until EVENT is set (exit 0), or the timeout (75)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from event" -f -a "reset" -d 'Clear EVENT (exit 0 whether or not it was set)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from event" -f -a "status" -d 'Exit 0 if EVENT is set, 1 if not'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "send" -d 'Send a message and wait until a receiver has taken it'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "post" -d 'Queue a message durably and return at once'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "recv" -d 'Take the oldest message: write it out, or run COMMAND on it as a job'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "work" -d 'Run the mailbox\'s messages as jobs, with N workers'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "wait-empty" -d 'Wait until nothing is queued, delayed or being received'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "retry" -d 'Put dead letters back in the queue'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "status" -d 'Show where jobs are: queued, delayed, running, finished or dead'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "wait" -d 'Wait until jobs have finished, and tell how'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "cancel" -d 'Cancel jobs: remove queued ones, stop running ones'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "list" -d 'List the queued messages with their sizes and ages'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "log" -d 'Print a job\'s output, kept in the mailbox'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from msg" -f -a "watch" -d 'Show what a mailbox is doing: queued, running jobs, rate, until a signal'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "connect" -d 'Connect NAME to BUS, or hold it while COMMAND runs (--hold)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "disconnect" -d 'Disconnect NAME from BUS (its directory is hidden as .NAME)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "members" -d 'List the connected participants, held and stale ones marked'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "send" -d 'Send a message to one participant (an error if it is not connected, or stale)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "broadcast" -d 'Send one copy to every other connected participant (stale ones skipped)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from bus" -f -a "recv" -d 'Take the oldest message for NAME; payload to standard output'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from swmr" -f -a "read" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from swmr" -f -a "write" -d 'Run COMMAND holding LOCK as a reader (read) or as the writer (write)'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from swmr" -f -a "status" -d 'Show readers, writer and waiting writers; exit 0 if free, 1 if held'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from sem" -f -a "run" -d 'Run COMMAND while holding one of N slots of SEM'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from sem" -f -a "status" -d 'Show slots, holders and waiters; exit 0 if a slot is free, 1 if all are held'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from grouplock" -f -a "run" -d 'Run COMMAND inside LOCK as a member of group NAME'
complete -c fsync -n "__fish_fsync_using_subcommand help; and __fish_seen_subcommand_from grouplock" -f -a "status" -d 'Show which group is inside and how many wait; exit 0 if none is inside, 1 if one is'
