/*!
Every `--json` output checked against its schema in docs/json.md, which these tests read: an
output that gains, loses or retypes a field without the document saying so fails here, and so
does a document that promises what the program does not print.

- The `schema` blocks of docs/json.md are parsed (the notation is explained there): a named
  object per block line `NAME {`, then `FIELD: TYPE` or `FIELD?: TYPE` (may be absent).
- Each output is produced in realistic states (free and held, with waiters where there can be
  some) and checked: every field it has is documented, every field documented without `?` is
  there, and every value has a documented type.
- The examples (`json NAME` blocks) are checked the same way.
- The reports are those of every command whose `--help` offers `--json` (found by walking the
  help), each documented, and each `--json` help text names exactly documented fields.

Waiters are observed as the other tests observe them: by the `-v` line that says a wait blocks,
or, for a swmr writer, by its blocked request in the kernel's lock table.
*/

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::OnceLock,
};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{HOLD, Holder, TestDir, eventually, flocks_on, json_of};

/// The outputs documented in docs/json.md: the name of its schema and the command that prints
/// it (with `--json`).
const REPORTS: &[(&str, &[&str])] = &[
    ("mutex-status", &["mutex", "status"]),
    ("mutex-watch", &["mutex", "watch"]),
    ("group-members", &["group", "members"]),
    ("group-watch", &["group", "watch"]),
    ("grouplock-status", &["grouplock", "status"]),
    ("sem-status", &["sem", "status"]),
    ("swmr-status", &["swmr", "status"]),
    ("event-status", &["event", "status"]),
    ("event-signal", &["event", "signal"]),
    ("event-reset", &["event", "reset"]),
    ("msg-list", &["msg", "list"]),
    ("msg-status", &["msg", "status"]),
    ("msg-status", &["msg", "wait"]),
    ("msg-status", &["msg", "cancel"]),
    ("msg-watch", &["msg", "watch"]),
    ("bus-members", &["bus", "members"]),
    ("bus-recv", &["bus", "recv"]),
    ("doctor", &["doctor"]),
];

// ---------------------------------------------------------------------------------------------
// The schemas, as docs/json.md writes them.

/// One alternative of a field's type.
#[derive(Debug, Clone, PartialEq)]
enum Type {
    String,
    Int,
    Number,
    Bool,
    True,
    Null,
    Timestamp,
    /// A string with exactly this value.
    Word(String),
    /// An array of elements of the (union) type.
    List(Vec<Type>),
    /// An object defined elsewhere in the document.
    Object(String),
}

#[derive(Debug)]
struct Field {
    name: String,
    optional: bool,
    /// The alternatives (`A | B`).
    ty: Vec<Type>,
}

#[derive(Debug)]
struct Doc {
    /// Every named object, with its fields in the document's order.
    objects: BTreeMap<String, Vec<Field>>,
    /// The `json NAME` examples: the object's name, the text, the line it starts on.
    examples: Vec<(String, String, usize)>,
}

const DOC: &str = "docs/json.md";

fn doc() -> &'static Doc {
    static DOC_ONCE: OnceLock<Doc> = OnceLock::new();
    DOC_ONCE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        parse_doc(&text).unwrap_or_else(|e| panic!("{DOC}: {e}"))
    })
}

/// The schemas and examples of the document `text`.
fn parse_doc(text: &str) -> Result<Doc, String> {
    let mut doc = Doc {
        objects: BTreeMap::new(),
        examples: Vec::new(),
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((n, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut block = Vec::new();
        for (m, inner) in lines.by_ref() {
            if inner.starts_with("```") {
                break;
            }
            block.push((m, inner));
        }
        let words: Vec<&str> = info.split_whitespace().collect();
        match words.as_slice() {
            ["schema"] => parse_schema(&block, &mut doc.objects)?,
            ["json", name] => {
                let text: Vec<&str> = block.iter().map(|(_, l)| *l).collect();
                doc.examples
                    .push((name.to_string(), text.join("\n"), n + 1));
            }
            ["schema" | "json", ..] => {
                return Err(format!(
                    "line {n}: a block `{info}` (want `schema` or `json NAME`)"
                ));
            }
            _ => {}
        }
    }
    for (name, fields) in &doc.objects {
        for f in fields {
            if let Some(missing) =
                (referenced(&f.ty).into_iter()).find(|o| !doc.objects.contains_key(o))
            {
                return Err(format!(
                    "{name}.{}: no object `{missing}` is defined",
                    f.name
                ));
            }
        }
    }
    Ok(doc)
}

/// The objects of one `schema` block.
fn parse_schema(
    block: &[(usize, &str)],
    objects: &mut BTreeMap<String, Vec<Field>>,
) -> Result<(), String> {
    let mut current: Option<(String, Vec<Field>)> = None;
    for &(n, raw) in block {
        let line = without_comment(raw).trim();
        let fail = |why: &str| Err(format!("line {n}: {why}: {raw}"));
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_suffix('{') {
            if current.is_some() {
                return fail("an object inside an object");
            }
            current = Some((name.trim().to_string(), Vec::new()));
        } else if line == "}" {
            let Some((name, fields)) = current.take() else {
                return fail("a `}` without an object");
            };
            if objects.insert(name.clone(), fields).is_some() {
                return fail(&format!("`{name}` is defined twice"));
            }
        } else {
            let Some((_, fields)) = current.as_mut() else {
                return fail("a field outside an object");
            };
            let Some((key, ty)) = line.split_once(':') else {
                return fail("not `FIELD: TYPE`");
            };
            let (name, optional) = match key.trim().strip_suffix('?') {
                Some(k) => (k.to_string(), true),
                None => (key.trim().to_string(), false),
            };
            if fields.iter().any(|f| f.name == name) {
                return fail(&format!("field `{name}` twice"));
            }
            let ty = parse_type(ty).map_err(|e| format!("line {n}: {e}: {raw}"))?;
            fields.push(Field { name, optional, ty });
        }
    }
    match current {
        Some((name, _)) => Err(format!("object `{name}` is not closed")),
        None => Ok(()),
    }
}

/// `line` without its `# comment` (a `#` outside quotes).
fn without_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `A | B | [C | D]`: the alternatives, split at the `|` outside brackets and quotes.
fn parse_type(text: &str) -> Result<Vec<Type>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut start) = (0, false, 0);
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '[' if !quoted => depth += 1,
            ']' if !quoted => depth -= 1,
            '|' if !quoted && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().map(|p| parse_one(p.trim())).collect()
}

fn parse_one(text: &str) -> Result<Type, String> {
    Ok(match text {
        "string" => Type::String,
        "int" => Type::Int,
        "number" => Type::Number,
        "bool" => Type::Bool,
        "true" => Type::True,
        "null" => Type::Null,
        "timestamp" => Type::Timestamp,
        _ if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') => {
            Type::Word(text[1..text.len() - 1].to_string())
        }
        _ if text.starts_with('[') && text.ends_with(']') => {
            Type::List(parse_type(&text[1..text.len() - 1])?)
        }
        _ if !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_') =>
        {
            Type::Object(text.to_string())
        }
        _ => return Err(format!("unknown type `{text}`")),
    })
}

/// The objects a type refers to.
fn referenced(ty: &[Type]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for t in ty {
        match t {
            Type::Object(name) => {
                out.insert(name.clone());
            }
            Type::List(inner) => out.extend(referenced(inner)),
            _ => {}
        }
    }
    out
}

impl Doc {
    /// The fields of object `name` (failing the test if the document lacks it).
    #[track_caller]
    fn object(&self, name: &str) -> &[Field] {
        self.objects
            .get(name)
            .unwrap_or_else(|| panic!("{DOC} documents no object `{name}`"))
    }

    /// Whether `value` is an object `name` as documented; if not, where and why.
    fn check(&self, name: &str, value: &Value, at: &str) -> Result<(), String> {
        let Some(fields) = self.objects.get(name) else {
            return Err(format!("{at}: {DOC} documents no object `{name}`"));
        };
        let Some(map) = value.as_object() else {
            return Err(format!("{at}: not an object (`{name}`): {value}"));
        };
        for key in map.keys() {
            if !fields.iter().any(|f| &f.name == key) {
                return Err(format!("{at}.{key}: not a field of `{name}` in {DOC}"));
            }
        }
        for f in fields {
            match map.get(&f.name) {
                None if f.optional => {}
                None => {
                    return Err(format!(
                        "{at}.{}: documented in `{name}` but missing from the output",
                        f.name
                    ));
                }
                Some(v) => self.check_type(&f.ty, v, &format!("{at}.{}", f.name))?,
            }
        }
        Ok(())
    }

    fn check_type(&self, ty: &[Type], value: &Value, at: &str) -> Result<(), String> {
        let mut why = Vec::new();
        for t in ty {
            let fits = match (t, value) {
                (Type::String, Value::String(_)) => Ok(()),
                (Type::Int, v) if v.is_u64() => Ok(()),
                (Type::Number, v) if v.as_f64().is_some_and(|n| n >= 0.0) => Ok(()),
                (Type::Bool, Value::Bool(_)) => Ok(()),
                (Type::True, Value::Bool(true)) => Ok(()),
                (Type::Null, Value::Null) => Ok(()),
                (Type::Timestamp, Value::String(s)) => humantime::parse_rfc3339(s)
                    .map(drop)
                    .map_err(|e| format!("{at}: not an RFC 3339 time in UTC ({e}): {s:?}")),
                (Type::Word(w), Value::String(s)) if w == s => Ok(()),
                (Type::List(inner), Value::Array(items)) => (items.iter().enumerate())
                    .try_for_each(|(i, v)| self.check_type(inner, v, &format!("{at}[{i}]"))),
                (Type::Object(name), Value::Object(_)) => self.check(name, value, at),
                _ => Err(String::new()),
            };
            match fits {
                Ok(()) => return Ok(()),
                Err(e) if !e.is_empty() => why.push(e),
                Err(_) => {}
            }
        }
        // An object or list that failed inside says where; otherwise the type is wrong here.
        match why.into_iter().next() {
            Some(inner) => Err(inner),
            None => Err(format!(
                "{at}: {value} is not of the documented type {}",
                shown(ty)
            )),
        }
    }

    /// Every field name and word (`"free"`) of object `name` and the objects in it.
    fn vocabulary(&self, name: &str, out: &mut BTreeSet<String>) {
        fn words(doc: &Doc, ty: &[Type], out: &mut BTreeSet<String>) {
            for t in ty {
                match t {
                    Type::Word(w) => {
                        out.insert(w.clone());
                    }
                    Type::List(inner) => words(doc, inner, out),
                    Type::Object(o) => doc.vocabulary(o, out),
                    _ => {}
                }
            }
        }
        for f in self.object(name) {
            out.insert(f.name.clone());
            words(self, &f.ty, out);
        }
    }
}

fn shown(ty: &[Type]) -> String {
    let one = |t: &Type| match t {
        Type::String => "string".to_string(),
        Type::Int => "int".to_string(),
        Type::Number => "number".to_string(),
        Type::Bool => "bool".to_string(),
        Type::True => "true".to_string(),
        Type::Null => "null".to_string(),
        Type::Timestamp => "timestamp".to_string(),
        Type::Word(w) => format!("{w:?}"),
        Type::List(inner) => format!("[{}]", shown(inner)),
        Type::Object(o) => o.clone(),
    };
    ty.iter().map(one).collect::<Vec<_>>().join(" | ")
}

/// Fail unless `value` is an object `name` as docs/json.md documents it.
#[track_caller]
fn conforms(name: &str, value: &Value) {
    if let Err(why) = doc().check(name, value, "$") {
        panic!("output does not match `{name}` in {DOC}:\n  {why}\noutput: {value}");
    }
}

/// `fsync ARGS...` (with `--json` among them) exiting `code`: its one line of JSON, checked
/// against `name`.
#[track_caller]
fn report(t: &TestDir, name: &str, args: &[&str], code: i32) -> Value {
    let out = t.fsync(args).run();
    out.code(code);
    assert_eq!(
        out.stdout.lines().count(),
        1,
        "`fsync {}` printed other than one line:\n{}",
        args.join(" "),
        out.stdout
    );
    let v = json_of(&out.stdout);
    conforms(name, &v);
    v
}

/// The next line of a `watch --json`, checked against `name`.
#[track_caller]
fn watched(watch: &mut Holder, name: &str) -> Value {
    let v = json_of(&watch.line());
    conforms(name, &v);
    v
}

/// Stop a watch (it runs until interrupted) and check it printed nothing more.
#[track_caller]
fn stop(mut watch: Holder) {
    watch.signal(Signal::SIGTERM);
    watch.wait_exit();
    let rest = watch.finish();
    assert_eq!(rest.stdout, "", "the watch printed more");
}

// ---------------------------------------------------------------------------------------------
// The document itself.

#[test]
fn the_examples_in_the_document_match_their_schemas() {
    let doc = doc();
    let mut shown = BTreeSet::new();
    for (name, text, line) in &doc.examples {
        let values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let mut count = 0;
        for v in values {
            let v = v.unwrap_or_else(|e| panic!("{DOC}:{line}: the example is not JSON: {e}"));
            if let Err(why) = doc.check(name, &v, "$") {
                panic!("{DOC}:{line}: the example does not match `{name}`:\n  {why}\n{v}");
            }
            count += 1;
        }
        assert!(count > 0, "{DOC}:{line}: an empty example");
        // Outputs are one object per line: so are the examples.
        assert_eq!(
            text.lines().filter(|l| !l.trim().is_empty()).count(),
            count,
            "{DOC}:{line}: write one object per line, as fsync prints them"
        );
        shown.insert(name.as_str());
    }
    for (name, _) in REPORTS {
        assert!(shown.contains(name), "{DOC} has no example of `{name}`");
    }
}

#[test]
fn every_documented_object_is_an_output_or_part_of_one() {
    let doc = doc();
    let used: BTreeSet<String> = (doc.objects.values().flatten())
        .flat_map(|f| referenced(&f.ty))
        .chain(REPORTS.iter().map(|(name, _)| name.to_string()))
        .collect();
    for name in doc.objects.keys() {
        assert!(
            used.contains(name),
            "{DOC} documents `{name}`, which no output prints (add it to REPORTS in \
             tests/json.rs with the command that prints it, or remove it)"
        );
    }
    for (name, _) in REPORTS {
        doc.object(name);
    }
}

/// The help of `fsync WORDS... --help`.
fn help(t: &TestDir, words: &[String]) -> String {
    let out = t.fsync(words).arg("--help").run();
    out.code(0);
    out.stdout.clone()
}

/// The subcommands a help text lists (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    let Some((_, rest)) = help.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    (rest.lines())
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

/// The description of `--json` in a help text, on one line; `None` if it has no `--json`.
fn json_help(help: &str) -> Option<String> {
    let mut lines = help.lines().skip_while(|l| l.trim() != "--json");
    lines.next()?;
    let text: Vec<&str> = lines
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    Some(text.join(" "))
}

#[test]
fn every_json_option_is_documented_and_its_help_names_the_documented_fields() {
    let t = TestDir::new();
    let doc = doc();
    let mut found = BTreeSet::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(words) = todo.pop() {
        let text = help(&t, &words);
        for sub in subcommands(&text) {
            let mut next = words.clone();
            next.push(sub);
            todo.push(next);
        }
        let Some(described) = json_help(&text) else {
            continue;
        };
        let command = format!("fsync {}", words.join(" "));
        let Some((name, _)) = REPORTS.iter().find(|(_, w)| *w == words.as_slice()) else {
            panic!(
                "`{command}` has --json, but no output of it is documented in {DOC} (add its \
                 schema there and to REPORTS in tests/json.rs)"
            );
        };
        found.insert(*name);
        // The help lists the fields by the names the document gives them, and no others.
        let mut vocabulary = BTreeSet::new();
        doc.vocabulary(name, &mut vocabulary);
        for f in doc.object(name) {
            assert!(
                described.contains(&format!("\"{}\"", f.name)),
                "`{command} --help` does not name field \"{}\" of `{name}` in its --json \
                 description: {described}",
                f.name
            );
        }
        for quoted in described.split('"').skip(1).step_by(2) {
            assert!(
                vocabulary.contains(quoted),
                "`{command} --help` names \"{quoted}\", which `{name}` in {DOC} does not \
                 have: {described}"
            );
        }
    }
    for (name, words) in REPORTS {
        assert!(
            found.contains(name),
            "{DOC} documents `{name}`, but `fsync {} --help` offers no --json",
            words.join(" ")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Every output, in the states it can report.

#[test]
fn mutex_status_free_held_and_released() {
    let t = TestDir::new();
    let v = report(&t, "mutex-status", &["mutex", "status", "--json", "L"], 0);
    assert_eq!((&v["state"], &v["holder"]), (&"free".into(), &Value::Null));
    let h = t.hold("L");
    let v = report(&t, "mutex-status", &["mutex", "status", "--json", "L"], 1);
    assert_eq!(v["holder"]["pid"], h.pid(), "{v}");
    h.finish().code(0);
    let v = report(&t, "mutex-status", &["mutex", "status", "--json", "L"], 0);
    assert!(v["fence"].is_u64(), "a released lock keeps its fence: {v}");
}

/// `mutex status --range`: the same object, with `range` and `lock` (absent without it).
#[test]
fn mutex_status_of_a_range_free_and_held() {
    let t = TestDir::new();
    let status = |range: &str, code| {
        report(
            &t,
            "mutex-status",
            &["mutex", "status", "--json", "--range", range, "L"],
            code,
        )
    };
    let v = status("7", 0);
    assert_eq!((&v["state"], &v["lock"]), (&"free".into(), &Value::Null));
    assert_eq!(v["range"], serde_json::json!({"start": 7, "len": 1}));
    let h = t
        .fsync([
            "mutex", "run", "--range", "5:10", "L", "--", "sh", "-c", HOLD,
        ])
        .hold();
    let v = status("0:0", 1);
    assert_eq!(
        v["lock"],
        serde_json::json!({"start": 5, "len": 10, "mode": "exclusive"})
    );
    assert_eq!(v["holder"]["pid"], h.pid(), "{v}");
    assert_eq!(
        (&v["fence"], &v["record_trusted"]),
        (&Value::Null, &true.into())
    );
    let v = status("15:0", 0);
    assert_eq!(v["lock"], Value::Null);
    h.finish().code(0);
    let v = report(&t, "mutex-status", &["mutex", "status", "--json", "L"], 0);
    assert!(v.get("range").is_none() && v.get("lock").is_none(), "{v}");
}

#[test]
fn mutex_watch_free_acquired_released_and_held() {
    let t = TestDir::new();
    let mut watch = t.fsync(["mutex", "watch", "--json", "L"]).start();
    assert_eq!(watched(&mut watch, "mutex-watch")["event"], "free");
    let h = t.hold("L");
    let v = watched(&mut watch, "mutex-watch");
    assert_eq!(
        (&v["event"], &v["holder"]["pid"]),
        (&"acquired".into(), &h.pid().into())
    );
    let mut second = t.fsync(["mutex", "watch", "--json", "L"]).start();
    let v = watched(&mut second, "mutex-watch");
    assert_eq!(
        (&v["event"], &v["holder"]["pid"]),
        (&"held".into(), &h.pid().into())
    );
    h.finish().code(0);
    let v = watched(&mut watch, "mutex-watch");
    assert_eq!(v["event"], "released", "{v}");
    assert_eq!(watched(&mut second, "mutex-watch")["event"], "released");
    stop(watch);
    stop(second);
}

#[test]
fn group_members_and_watch() {
    let t = TestDir::new();
    let mut watch = t.fsync(["group", "watch", "--json", "G"]).start();
    assert_eq!(watched(&mut watch, "group-watch")["event"], "empty");
    let v = report(&t, "group-members", &["group", "members", "--json", "G"], 0);
    assert_eq!(v["count"], 0, "{v}");
    let join = || {
        t.fsync(["group", "join", "G", "--", "sh", "-c", HOLD])
            .hold()
    };
    let (a, b) = (join(), join());
    assert_eq!(watched(&mut watch, "group-watch")["event"], "not-empty");
    // The record of a member fills in as it starts its command: wait for both child pids.
    let mut v = Value::Null;
    eventually("both members show their command's pid", || {
        v = report(&t, "group-members", &["group", "members", "--json", "G"], 0);
        v["members"]
            .as_array()
            .is_some_and(|m| m.len() == 2 && m.iter().all(|h| h["child_pid"].is_u64()))
    });
    assert_eq!(v["count"], 2, "{v}");
    a.finish().code(0);
    b.finish().code(0);
    assert_eq!(watched(&mut watch, "group-watch")["event"], "empty");
    stop(watch);
}

#[test]
fn grouplock_status_free_and_held_with_a_waiter() {
    let t = TestDir::new();
    let status = ["grouplock", "status", "--json", "L"];
    let v = report(&t, "grouplock-status", &status, 0);
    assert_eq!(v["inside"], serde_json::json!([]), "{v}");
    let member = |group: &str, v: &[&str], cmd: &str| {
        t.fsync(["grouplock", "run", "L", "--group", group])
            .args(v)
            .args(["--", "sh", "-c", cmd])
    };
    let a = member("gA", &[], HOLD).hold();
    let mut b = member("gB", &["-v"], "true").start();
    let said = b.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    let v = report(&t, "grouplock-status", &status, 1);
    assert_eq!(
        v["inside"],
        serde_json::json!([{"group": "gA", "count": 1}])
    );
    assert_eq!(v["waiting"], 1, "{v}");
    a.finish().code(0);
    b.finish().code(0);
}

#[test]
fn sem_status_uncreated_held_with_a_waiter_and_free() {
    let t = TestDir::new();
    let status = ["sem", "status", "--json", "S"];
    let v = report(&t, "sem-status", &status, 0);
    assert_eq!(v["slots"], Value::Null, "not created yet: {v}");
    let slot = |v: &[&str], cmd: &str| {
        t.fsync(["sem", "run", "S", "--slots", "1"])
            .args(v)
            .args(["--", "sh", "-c", cmd])
    };
    let h = slot(&[], HOLD).hold();
    let mut waiter = slot(&["-v"], "true").start();
    let said = waiter.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    let v = report(&t, "sem-status", &status, 1);
    assert_eq!(v["held"][0]["holder"]["pid"], h.pid(), "{v}");
    assert_eq!(v["waiting"], 1, "{v}");
    h.finish().code(0);
    waiter.finish().code(0);
    let v = report(&t, "sem-status", &status, 0);
    assert_eq!((&v["slots"], &v["waiting"]), (&1.into(), &0.into()), "{v}");
}

#[test]
fn swmr_status_free_readers_with_a_waiting_writer_and_the_writer() {
    let t = TestDir::new();
    let status = ["swmr", "status", "--json", "L"];
    let v = report(&t, "swmr-status", &status, 0);
    assert_eq!(v["state"], "free", "{v}");
    let lock = |verb: &str| t.fsync(["swmr", verb, "L", "--", "sh", "-c", HOLD]);
    let (r1, r2) = (lock("read").hold(), lock("read").hold());
    let mut writer = lock("write").start();
    let pid = writer.pid();
    eventually("the writer waits", || {
        (flocks_on(&t.join("L")).iter()).any(|l| l.pid == pid && l.exclusive && l.waiting)
    });
    let v = report(&t, "swmr-status", &status, 1);
    assert_eq!(
        (&v["state"], &v["readers"]),
        (&"read".into(), &2.into()),
        "{v}"
    );
    assert_eq!(v["waiting"], 1, "{v}");
    r1.finish().code(0);
    r2.finish().code(0);
    writer.expect("acquired");
    let v = report(&t, "swmr-status", &status, 1);
    assert_eq!(v["state"], "write", "{v}");
    assert_eq!(v["writer"]["pid"], writer.pid(), "{v}");
    writer.finish().code(0);
}

#[test]
fn event_status_unset_and_set() {
    let t = TestDir::new();
    let status = ["event", "status", "--json", "E"];
    assert_eq!(report(&t, "event-status", &status, 1)["state"], "unset");
    t.fsync(["event", "signal", "E"]).run().code(0);
    assert_eq!(report(&t, "event-status", &status, 0)["state"], "set");
}

#[test]
fn event_signal_and_reset_say_whether_it_was_set() {
    let t = TestDir::new();
    let signal = ["event", "signal", "--json", "E"];
    let reset = ["event", "reset", "--json", "E"];
    let v = report(&t, "event-reset", &reset, 0);
    assert_eq!((&v["path"], &v["was_set"]), (&"E".into(), &false.into()));
    assert_eq!(report(&t, "event-signal", &signal, 0)["was_set"], false);
    assert_eq!(report(&t, "event-signal", &signal, 0)["was_set"], true);
    assert_eq!(report(&t, "event-reset", &reset, 0)["was_set"], true);
    assert_eq!(report(&t, "event-reset", &reset, 0)["was_set"], false);
}

#[test]
fn msg_list_empty_and_with_posted_synchronous_and_skipped_entries() {
    let t = TestDir::new();
    let list = ["msg", "list", "--json", "B"];
    t.fsync(["msg", "recv", "-n", "B"]).run().code(75); // made, empty
    assert_eq!(report(&t, "msg-list", &list, 0)["count"], 0);
    for data in ["one", "two"] {
        t.fsync(["msg", "post", "B", "--data", data]).run().code(0);
    }
    let mut sender = t
        .fsync(["msg", "send", "-v", "B", "--data", "three"])
        .start();
    let said = sender.stderr_line();
    assert!(said.contains("waiting"), "-v said {said:?}");
    // Something receivers pass over: a directory named as a message.
    std::fs::create_dir(
        crate::harness::first_shard(t.join("B")).join("00000000000000000000.h-1-0.-.msg"),
    )
    .unwrap();
    let v = report(&t, "msg-list", &list, 0);
    assert_eq!(v["count"], 3, "{v}");
    assert_eq!(v["messages"][2]["sync"], true, "{v}");
    assert_eq!(v["skipped"].as_array().map(Vec::len), Some(1), "{v}");
    sender.signal(Signal::SIGTERM);
    sender.wait_exit();
}

/// `msg watch --json`: a look with nothing running, then one with the job a worker runs, its
/// worker named; each line conforms (a look is printed each second whether or not it changed).
#[test]
fn msg_watch_empty_then_with_a_running_job() {
    let t = TestDir::new();
    t.fsync(["msg", "post", "B", "--data", "x"]).run().code(0);
    let mut watch = t.fsync(["msg", "watch", "--json", "B"]).start();
    let v = watched(&mut watch, "msg-watch");
    assert_eq!(
        (&v["queued"], &v["running"]),
        (&1.into(), &Value::Array(vec![])),
        "{v}"
    );
    let job = format!("\"$FSYNC\" event wait {}", t.arg("E"));
    let worker = t
        .fsync(["msg", "work", "--until-empty", "B", "--", "sh", "-c", &job])
        .start();
    let v = loop {
        let v = watched(&mut watch, "msg-watch");
        if v["running"].as_array().is_some_and(|r| !r.is_empty()) {
            break v;
        }
    };
    assert_eq!(v["running"][0]["id"], 1, "{v}");
    assert_eq!(v["running"][0]["attempt"], 1, "{v}");
    assert_eq!(v["running"][0]["pid"], worker.pid(), "{v}");
    t.fsync(["event", "signal", "E"]).run().code(0);
    worker.finish().code(0);
    watch.signal(Signal::SIGTERM);
    let rest = watch.finish();
    rest.killed_by(Signal::SIGTERM);
    for line in rest.stdout.lines() {
        conforms("msg-watch", &json_of(line));
    }
}

#[test]
fn msg_list_with_delayed_and_dead_messages() {
    let t = TestDir::new();
    let list = ["msg", "list", "--json", "B"];
    t.fsync(["msg", "post", "B", "--data", "poison"])
        .run()
        .code(0);
    t.fsync(["msg", "recv", "--retries", "0", "B", "--", "false"])
        .run()
        .code(1);
    t.fsync(["msg", "post", "B", "--delay", "1h", "--data", "later"])
        .run()
        .code(0);
    t.fsync(["msg", "post", "B", "--data", "now"]).run().code(0);
    let v = report(&t, "msg-list", &list, 0);
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["delayed"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(v["delayed"][0]["due"].is_string(), "{v}");
    assert_eq!(v["dead"][0]["failed"], 1, "{v}");
    assert!(v["messages"][0].get("due").is_none(), "{v}");
}

#[test]
fn bus_members_and_recv_of_text_and_bytes() {
    let t = TestDir::new();
    for name in ["a", "b"] {
        t.fsync(["bus", "connect", "BUS", name]).run().code(0);
    }
    t.fsync([
        "bus", "send", "BUS", "--from", "a", "--to", "b", "--data", "hi",
    ])
    .run()
    .code(0);
    std::fs::write(t.join("bytes"), [0xff, 0xfe, 0x00]).unwrap();
    t.sh("exec \"$FSYNC\" bus send BUS --from a --to b < bytes")
        .run()
        .code(0);
    // c held while its command runs; d stale: its holder (fsync, killed by its command) and
    // its command are gone.
    let held = t
        .fsync([
            "bus", "connect", "--hold", "BUS", "c", "--", "sh", "-c", HOLD,
        ])
        .hold();
    t.fsync([
        "bus",
        "connect",
        "--hold",
        "BUS",
        "d",
        "-c",
        "kill -9 $PPID",
    ])
    .run()
    .killed_by(Signal::SIGKILL);
    let v = report(&t, "bus-members", &["bus", "members", "--json", "BUS"], 0);
    assert_eq!(v["members"][1]["pending"], 2, "{v}");
    let states: Vec<&str> = (v["members"].as_array().unwrap().iter())
        .map(|m| m["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["connected", "connected", "held", "stale"], "{v}");
    assert_eq!(v["members"][0]["holder"], Value::Null, "{v}");
    assert_eq!(v["members"][2]["holder"]["pid"], held.pid(), "{v}");
    assert_eq!(
        v["members"][3]["holder"]["command"], "sh -c kill -9 $PPID",
        "{v}"
    );
    held.finish().code(0);
    let recv = ["bus", "recv", "-n", "--json", "BUS", "b"];
    let v = report(&t, "bus-recv", &recv, 0);
    assert_eq!((&v["from"], &v["data"]), (&"a".into(), &"hi".into()));
    let v = report(&t, "bus-recv", &recv, 0);
    assert_eq!(v["data_b64"], "//4A", "{v}");
}

#[test]
fn doctor() {
    let t = TestDir::new();
    let out = t.fsync(["doctor", "--json", "."]).run();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", out.stderr);
    conforms("doctor", &json_of(&out.stdout));
}

// ---------------------------------------------------------------------------------------------
// The checker itself: it must catch what it is for.

#[test]
fn the_checker_refuses_unknown_missing_and_mistyped_fields() {
    let doc = parse_doc(
        "```schema\nh {\n  pid: int\n  since: timestamp | null  # c\n}\nr {\n  state: \"a\" | \"b\"\n  \
         list: [h]\n  opt?: string\n}\n```\n",
    )
    .unwrap();
    let ok = serde_json::json!({"state": "a", "list": [{"pid": 1, "since": null}]});
    assert_eq!(doc.check("r", &ok, "$"), Ok(()));
    let ok = serde_json::json!({"state": "b", "list": [], "opt": "x"});
    assert_eq!(doc.check("r", &ok, "$"), Ok(()));
    for bad in [
        serde_json::json!({"state": "a", "list": [], "waiters": 0}),
        serde_json::json!({"list": []}),
        serde_json::json!({"state": "c", "list": []}),
        serde_json::json!({"state": "a", "list": [{"pid": -1, "since": null}]}),
        serde_json::json!({"state": "a", "list": [{"pid": 1, "since": "yesterday"}]}),
        serde_json::json!({"state": "a", "list": [{"pid": 1}]}),
        serde_json::json!({"state": "a", "list": {}}),
        serde_json::json!({"state": "a", "list": [], "opt": null}),
    ] {
        assert!(doc.check("r", &bad, "$").is_err(), "accepted {bad}");
    }
    assert!(parse_doc("```schema\nr {\n  x: holder\n}\n```\n").is_err());
    assert!(parse_doc("```schema\nr {\n  x: float\n}\n```\n").is_err());
}
