/*!
A model file system for the crash-state checker (`crash_states.rs`), after ALICE and CrashMonkey:
the file-system operations a command made, read from an `strace -f -y -xx` trace, replayed on a
model that keeps what is current and what is durable, so that the state a power cut leaves after
any prefix of the operations can be built as a real directory and examined.

What is durable (the pessimistic model POSIX promises, nothing more):

- a file's data, as it was at its last `fsync` or `fdatasync` (before that: empty, for a file the
  trace created); never at a write, a rename or a close;
- everything done before a `syncfs` of the file system, at the `syncfs`;
- a directory entry operation (create, `mkdir`, `link`, `unlink`, `rmdir`, `rename`), once a
  directory it touches is synced, together with the earlier entry operations of the same inode (a
  rename is one operation, atomic: it moves a file whole, never leaving it in two places or none;
  the file's earlier moves go with it); syncing a file makes no entry of it durable.

Besides that per-directory view, two more states per prefix: entry operations durable in the
order they were made (a journal of metadata, as ext4's), file data only as synced; and every
operation fully done (a crash after the page cache was written back).
*/

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::Path,
    sync::Arc,
};

/// An inode's number in the model: its index in [`Model::nodes`].
pub(crate) type Ino = usize;

/// The root directory of the model (the directory the trace's paths are under).
pub(crate) const ROOT: Ino = 0;

/// One recorded operation that changes the file system or makes it durable.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// An entry operation on inode `ino`: `del` removes an entry, `add` makes one (a rename does
    /// both at once).
    Entry {
        ino: Ino,
        del: Option<(Ino, String)>,
        add: Option<(Ino, String)>,
    },
    /// File `ino` now holds `data`.
    Data { ino: Ino, data: Arc<Vec<u8>> },
    /// `fsync`/`fdatasync` of a file (`data`: what it holds then) or of a directory (`None`).
    Sync {
        ino: Ino,
        data: Option<Arc<Vec<u8>>>,
    },
    /// `syncfs` of the file system: every earlier operation durable, each file holding `data`.
    SyncAll { data: HashMap<Ino, Arc<Vec<u8>>> },
}

/// A node: a directory or a regular file.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) dir: bool,
}

/// A file system state: each directory's entries and each file's data.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    entries: HashMap<Ino, BTreeMap<String, Ino>>,
    data: HashMap<Ino, Arc<Vec<u8>>>,
}

impl Tree {
    fn apply_entry(&mut self, del: Option<&(Ino, String)>, add: Option<&(Ino, String)>, ino: Ino) {
        if let Some((d, name)) = del {
            self.entries.entry(*d).or_default().remove(name);
        }
        if let Some((d, name)) = add {
            self.entries
                .entry(*d)
                .or_default()
                .insert(name.clone(), ino);
        }
    }

    /// Every path reachable from the root with its node (`Some(data)` for a file), in order.
    pub(crate) fn walk(&self, nodes: &[Node]) -> Vec<(String, Option<Arc<Vec<u8>>>)> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, String::new())];
        while let Some((dir, at)) = stack.pop() {
            for (name, &ino) in self.entries.get(&dir).into_iter().flatten() {
                let path = format!("{at}/{name}");
                if nodes[ino].dir {
                    out.push((path.clone(), None));
                    stack.push((ino, path));
                } else {
                    let data = self.data.get(&ino).cloned().unwrap_or_default();
                    out.push((path, Some(data)));
                }
            }
        }
        out.sort();
        out
    }

    /// Make this state under `dir` (which exists and is empty).
    pub(crate) fn materialise(&self, nodes: &[Node], dir: &Path) {
        for (path, data) in self.walk(nodes) {
            let at = dir.join(&path[1..]);
            match data {
                None => std::fs::create_dir(&at),
                Some(data) => std::fs::write(&at, &*data),
            }
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", at.display()));
        }
    }

    /// The names of the entries of the directory at `path` (from the root, `a/b`), if any.
    pub(crate) fn list(&self, path: &str) -> Vec<String> {
        let mut at = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            match self.entries.get(&at).and_then(|e| e.get(part)) {
                Some(&ino) => at = ino,
                None => return Vec::new(),
            }
        }
        self.entries
            .get(&at)
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The data of the file at `path`, if it is one.
    pub(crate) fn read(&self, path: &str) -> Option<Arc<Vec<u8>>> {
        let (dir, name) = path.rsplit_once('/')?;
        let mut at = ROOT;
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            at = *self.entries.get(&at)?.get(part)?;
        }
        let ino = *self.entries.get(&at)?.get(name)?;
        Some(self.data.get(&ino).cloned().unwrap_or_default())
    }
}

/// The operations of a trace, replayed on a model.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) nodes: Vec<Node>,
    pub(crate) ops: Vec<Op>,
    /// The current state, after every op.
    pub(crate) now: Tree,
    /// Where each traced process's descriptors write next (`pid`, `fd`).
    offsets: HashMap<(u32, u32), u64>,
    /// The descriptors opened `O_APPEND`: each write goes to the end.
    appending: std::collections::HashSet<(u32, u32)>,
}

impl Model {
    /// A model of an empty directory.
    pub(crate) fn new() -> Model {
        Model {
            nodes: vec![Node { dir: true }],
            ..Model::default()
        }
    }

    /// The node at `path` (relative to the root) now, if any.
    fn lookup(&self, path: &str) -> Option<Ino> {
        let mut at = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = *self.now.entries.get(&at)?.get(part)?;
        }
        Some(at)
    }

    /// The parent directory of `path` now and the last component.
    fn parent(&self, path: &str) -> (Ino, String) {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let ino = self
            .lookup(dir)
            .unwrap_or_else(|| panic!("the trace names {path}, whose directory the model lacks"));
        (ino, name.to_string())
    }

    fn push(&mut self, op: Op) {
        match &op {
            Op::Entry { ino, del, add } => self.now.apply_entry(del.as_ref(), add.as_ref(), *ino),
            Op::Data { ino, data } => {
                self.now.data.insert(*ino, data.clone());
            }
            Op::Sync { .. } | Op::SyncAll { .. } => {}
        }
        self.ops.push(op);
    }

    fn create(&mut self, path: &str, dir: bool) {
        if self.lookup(path).is_some() {
            return;
        }
        let ino = self.nodes.len();
        self.nodes.push(Node { dir });
        let add = Some(self.parent(path));
        self.push(Op::Entry {
            ino,
            del: None,
            add,
        });
    }

    fn remove(&mut self, path: &str) {
        let ino = self.lookup(path).expect("removed what exists");
        let del = Some(self.parent(path));
        self.push(Op::Entry {
            ino,
            del,
            add: None,
        });
    }

    fn rename(&mut self, from: &str, to: &str, keep: bool) {
        let ino = self.lookup(from).expect("renamed what exists");
        let del = (!keep).then(|| self.parent(from));
        let add = Some(self.parent(to));
        self.push(Op::Entry { ino, del, add });
    }

    fn write(&mut self, path: &str, at: Option<u64>, bytes: &[u8], key: (u32, u32)) {
        let ino = self.lookup(path).expect("wrote what exists");
        let end_now = self.now.data.get(&ino).map_or(0, |d| d.len() as u64);
        let offset = match (at, self.appending.contains(&key)) {
            (Some(at), _) => at,
            (None, true) => end_now,
            (None, false) => self.offsets.get(&key).copied().unwrap_or(0),
        };
        if at.is_none() {
            self.offsets.insert(key, offset + bytes.len() as u64);
        }
        let mut data = (*self.now.data.get(&ino).cloned().unwrap_or_default()).clone();
        let end = offset as usize + bytes.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(bytes);
        self.push(Op::Data {
            ino,
            data: Arc::new(data),
        });
    }

    fn truncate(&mut self, path: &str, len: u64) {
        let ino = self.lookup(path).expect("truncated what exists");
        let mut data = (*self.now.data.get(&ino).cloned().unwrap_or_default()).clone();
        data.resize(len as usize, 0);
        self.push(Op::Data {
            ino,
            data: Arc::new(data),
        });
    }

    fn sync(&mut self, path: &str) {
        let Some(ino) = self.lookup(path) else {
            return; // a file unlinked since: nothing of it can be found after a crash
        };
        let data =
            (!self.nodes[ino].dir).then(|| self.now.data.get(&ino).cloned().unwrap_or_default());
        self.push(Op::Sync { ino, data });
    }

    /// Replay the trace `text` of processes run in `cwd`, keeping the operations under `root`.
    pub(crate) fn replay(&mut self, text: &str, root: &str, cwd: &str) {
        let mut unfinished: HashMap<u32, String> = HashMap::new();
        for line in text.lines() {
            let Some((pid, rest)) = line.split_once(' ') else {
                continue;
            };
            let pid: u32 = pid.parse().expect("strace -f prints the pid first");
            let rest = rest.trim_start();
            if rest.starts_with("+++") || rest.starts_with("---") {
                continue;
            }
            let call = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
                unfinished.insert(pid, head.to_string());
                continue;
            } else if rest.starts_with("<...") {
                let tail = rest.split_once("resumed>").expect("a resumed call").1;
                let head = unfinished
                    .remove(&pid)
                    .expect("resumes what was unfinished");
                format!("{head}{tail}")
            } else {
                rest.to_string()
            };
            self.call(pid, &call, root, cwd);
        }
    }

    fn call(&mut self, pid: u32, call: &str, root: &str, cwd: &str) {
        let Some((name, rest)) = call.split_once('(') else {
            return;
        };
        let Some((args, ret)) = rest.rsplit_once(") = ") else {
            return; // killed in the call (`= ?`)
        };
        if ret.starts_with('-') || ret.starts_with('?') {
            return; // failed: changed nothing
        }
        let args = split_args(args);
        // A path argument: decoded, made absolute, under `root` or `None`.
        let inside = |p: String| match p.strip_prefix(root) {
            Some("") => Some(String::new()),
            Some(rest) if rest.starts_with('/') => Some(rest.to_string()),
            _ => None,
        };
        let at = |dirfd: &str, name: &str| -> Option<String> {
            let name = unquote(name);
            let full = match name.starts_with('/') {
                true => name,
                false => format!("{}/{name}", annotation(dirfd).unwrap_or_else(|| cwd.into())),
            };
            inside(full)
        };
        let fd_path = |arg: &str| annotation(arg).and_then(&inside);
        let fd_key = |arg: &str| -> (u32, u32) {
            let n = arg
                .split('<')
                .next()
                .unwrap_or("")
                .parse()
                .unwrap_or(u32::MAX);
            (pid, n)
        };
        match name {
            "open" | "openat" | "creat" => {
                let flags = match name {
                    "openat" => args[2].as_str(),
                    "open" => args[1].as_str(),
                    _ => "O_CREAT|O_TRUNC",
                };
                let Some(path) = annotation(ret).and_then(&inside) else {
                    return;
                };
                assert!(!flags.contains("O_TMPFILE"), "unmodelled: {call}");
                self.offsets.insert(fd_key(ret), 0);
                match flags.contains("O_APPEND") {
                    true => self.appending.insert(fd_key(ret)),
                    false => self.appending.remove(&fd_key(ret)),
                };
                if flags.contains("O_CREAT") {
                    self.create(&path, false);
                }
                if flags.contains("O_TRUNC") {
                    self.truncate(&path, 0);
                }
            }
            "mkdir" | "mkdirat" => {
                let path = match name {
                    "mkdir" => at("AT_FDCWD", &args[0]),
                    _ => at(&args[0], &args[1]),
                };
                if let Some(path) = path {
                    self.create(&path, true);
                }
            }
            "write" | "pwrite64" => {
                if let Some(path) = fd_path(&args[0]) {
                    let bytes = unquote_bytes(&args[1]);
                    let n: usize = ret.trim().parse().expect("bytes written");
                    let off = (name == "pwrite64").then(|| args[3].parse().expect("offset"));
                    self.write(&path, off, &bytes[..n], fd_key(&args[0]));
                }
            }
            "ftruncate" => {
                if let Some(path) = fd_path(&args[0]) {
                    self.truncate(&path, args[1].parse().expect("length"));
                }
            }
            "fsync" | "fdatasync" => {
                if let Some(path) = fd_path(&args[0]) {
                    self.sync(&path);
                }
            }
            "syncfs" if fd_path(&args[0]).is_some() => {
                let data = self.now.data.clone();
                self.push(Op::SyncAll { data });
            }
            "rename" | "renameat" | "renameat2" | "link" | "linkat" => {
                let (from, to) = match name {
                    "rename" | "link" => (at("AT_FDCWD", &args[0]), at("AT_FDCWD", &args[1])),
                    _ => (at(&args[0], &args[1]), at(&args[2], &args[3])),
                };
                if name == "renameat2" {
                    assert!(!args[4].contains("EXCHANGE"), "unmodelled: {call}");
                }
                match (from, to) {
                    (Some(from), Some(to)) => self.rename(&from, &to, name.starts_with("link")),
                    (None, None) => {}
                    _ => panic!("unmodelled: a move into or out of the model: {call}"),
                }
            }
            "unlink" | "rmdir" | "unlinkat" => {
                let path = match name {
                    "unlinkat" => at(&args[0], &args[1]),
                    _ => at("AT_FDCWD", &args[0]),
                };
                if let Some(path) = path {
                    self.remove(&path);
                }
            }
            "writev" | "pwritev" | "pwritev2" | "fallocate" | "truncate" | "copy_file_range" => {
                assert!(
                    args.first().and_then(|a| fd_path(a)).is_none(),
                    "unmodelled: {call}"
                );
            }
            _ => {}
        }
    }

    /// The state a crash after the first `k` operations leaves, as `view` says.
    pub(crate) fn crash(&self, k: usize, view: View) -> Tree {
        let mut tree = Tree::default();
        let ops = &self.ops[..k];
        let durable = match view {
            View::Applied => return self.replayed(k),
            View::Ordered => vec![true; k],
            View::PerDirectory => self.durable_entries(ops),
        };
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Entry { ino, del, add } if durable[i] => {
                    tree.apply_entry(del.as_ref(), add.as_ref(), *ino);
                }
                Op::Sync {
                    ino,
                    data: Some(data),
                } => {
                    tree.data.insert(*ino, data.clone());
                }
                Op::SyncAll { data } => {
                    for (ino, data) in data {
                        tree.data.insert(*ino, data.clone());
                    }
                }
                _ => {}
            }
        }
        tree
    }

    /// Every operation of the first `k` done.
    fn replayed(&self, k: usize) -> Tree {
        let mut tree = Tree::default();
        for op in &self.ops[..k] {
            match op {
                Op::Entry { ino, del, add } => tree.apply_entry(del.as_ref(), add.as_ref(), *ino),
                Op::Data { ino, data } => {
                    tree.data.insert(*ino, data.clone());
                }
                Op::Sync { .. } | Op::SyncAll { .. } => {}
            }
        }
        tree
    }

    /// Which entry operations of `ops` a sync among them made durable (module docs).
    fn durable_entries(&self, ops: &[Op]) -> Vec<bool> {
        let mut durable = vec![false; ops.len()];
        for (j, op) in ops.iter().enumerate() {
            if let Op::SyncAll { .. } = op {
                durable[..j].fill(true);
                continue;
            }
            let Op::Sync {
                ino: dir,
                data: None,
            } = op
            else {
                continue;
            };
            for (i, earlier) in ops[..j].iter().enumerate() {
                if let Op::Entry { del, add, .. } = earlier {
                    let touches =
                        |e: &Option<(Ino, String)>| e.as_ref().is_some_and(|(d, _)| d == dir);
                    durable[i] |= touches(del) || touches(add);
                }
            }
        }
        // A durable entry operation brings the earlier ones of its inode with it.
        let mut inodes: BTreeSet<Ino> = BTreeSet::new();
        for i in (0..ops.len()).rev() {
            if let Op::Entry { ino, .. } = &ops[i] {
                if durable[i] {
                    inodes.insert(*ino);
                } else if inodes.contains(ino) {
                    durable[i] = true;
                }
            }
        }
        durable
    }
}

/// Which state a crash leaves (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum View {
    /// Entries durable once a directory they touch is synced; data once synced.
    PerDirectory,
    /// Entries durable in the order they were made; data once synced.
    Ordered,
    /// Everything done.
    Applied,
}

/// The arguments of a call, split at the top level (strings are hex-escaped, so hold no comma).
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in args.chars() {
        match c {
            '[' | '{' | '<' => depth += 1,
            ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

/// The path of a descriptor annotated by `-y` (`3</tmp/x>`), decoded.
fn annotation(arg: &str) -> Option<String> {
    let (_, rest) = arg.split_once('<')?;
    let inner = rest.strip_suffix('>')?;
    let inner = inner.strip_suffix(" (deleted)").unwrap_or(inner);
    Some(String::from_utf8_lossy(&decode(inner)).into_owned())
}

/// A quoted, hex-escaped string argument, decoded.
fn unquote(arg: &str) -> String {
    String::from_utf8_lossy(&unquote_bytes(arg)).into_owned()
}

fn unquote_bytes(arg: &str) -> Vec<u8> {
    let inner = arg.trim_end_matches("...");
    let inner = inner
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or_else(|| panic!("not a string: {arg}"));
    decode(inner)
}

/// `\x41\x42` to `AB` (`strace -xx` escapes every byte).
fn decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}
