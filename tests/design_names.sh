#!/usr/bin/env bash
# docs/DESIGN.md says the code is right wherever the two differ; this keeps the file's names true, and
# where it says a name lives, that it lives there (ctest: design_names). Every `backticked` span of the
# file, headings' included, is read (fenced ``` blocks are not) and sorted by these rules, in this order:
#   skipped, not a name: a span with a space, quote or backslash (commands, messages, code snippets:
#     `ssh -G`, `"type"`, `\r`); one starting with `-` (flags: `--verbose`), `[` or `~[` (Catch2 tags,
#     addresses: `[wire]`, `[::]:0`), `/` or `~/` (a path on the machine, not in the tree); one holding
#     `<` (templates, placeholders, system headers: `<utility>`, `local_<HOROVOD_HOSTNAME>`) or `%`;
#     one holding `=` or `$` (assignments, values, shell expansions: `LAB_SSHD=0`, `=IFACE`);
#     numbers, addresses and commit ids (digits, dots and colons: `0.0.0.0:0`, `::1`; 7 to 40 hex
#     digits holding a digit: `3c252b4`); ALL_CAPS words, `*` and `:` allowed (environment variables,
#     C macros and flags: `HVRUN_LOG_LEVEL`, `HOROVOD_*`, `PR_SET_PDEATHSIG`); a name with a manual
#     section (a system call or C library function: `writev(2)`, `posix_spawn(3)`); and the few names
#     of other projects that hvrun's code does not use, listed in `foreign` below (Gloo's internals,
#     Slurm's settings).
#   a path (it holds a /): its first folder one of this tree's (agent/ cmd/ ...), a launcher room
#     (`ssh/`, read as launcher/ssh/) or `hvrun/` (an include path: collectives/include/hvrun/, or a
#     file generated from common/NAME.in). It must exist; `*` in it is a glob (`launcher/job/job.*`).
#     A path whose first folder is none of these belongs to another project (`boost/asio/post.hpp`,
#     `gloo/transport/tcp/loop.h`) and is skipped.
#   a file name (no /, ends in a file suffix: .cpp .hpp .h .cc .c .sh .md .py .txt .in .so, or in .*
#     for a header and its source: `check_run.*`): a file of that name exists in the tree, or the
#     sources name it (a system header they include, a library they build).
#   an identifier, after a trailing call or brace (`decide()`, `terminate{grace}`) and a leading `~`
#     (a destructor) are taken off: one word (CamelCase types, snake_case functions, kConstants,
#     message and field names) must occur as a word in the sources. `A::B::c` (members, nested types,
#     namespaces: `Job::Impl::run`, `std::jthread`) and `Type.field` (`RankLaunch.env`): each pair is
#     written so in code (`AgentLinks::took_output(` out of its class) or the second is declared in the
#     body of a class, struct, enum or namespace named as the first, in a file where the span's first
#     part occurs (`struct Job::Impl { ... void attach(...) ...`). `*::name` means some class has a
#     member `name`. `value.field` with a lowercase first part (`hello.free_port`: a message's field)
#     needs its parts in one source file.
#   a hyphenated word (programs, lab commands, probe outcomes: `hvrun-agent`, `wrong-host`) must occur
#     as written in the sources.
#   anything else is reported as unreadable, so that a new kind of span gets a rule here.
# Then where a name lives, read from the text between spans of one paragraph, heading or table row
# (a name here is an identifier span; a file is a path span naming a file or `stem.*` pair of the tree,
# or a file name span, which means every file of the tree of that name):
#   layout rows of section 1.1: a table row whose first cell is a folder (`agent/`) or a launcher room
#     (`ssh/`, read as launcher/ssh/), and a paragraph that opens `**Name** (`folder/``. In one:
#     every C or C++ file name (`agent.cpp`, `job_host.hpp`) is a file in that folder or below it; in a
#     room's row every bare lowercase word of the third cell outside parentheses is a stem: some
#     launcher/ROOM/stem.* exists; in a table row every name of the second and later cells outside
#     parentheses (`StoreClient`, `hvrun_common`) occurs in the code of that folder; and the names listed
#     right after a file or stem (`ssh_session` (`SshSession`, `SshError`), `error.hpp` (`throw_errno`,
#     ...)) are declared in it (a .cpp there stands for its .hpp/.cpp pair; a member's last part is
#     declared, the others occur in the same file). Other names in parentheses explain, and may name
#     other folders' code (the common layer's `Child`, `WorkerNotice`: `HostsUpdatedRequest`).
#   anywhere: `file` (`Name`, `Other`/`More`, ...) and `file`'s `Name`: each listed name (the list runs
#     while spans are separated by ", " or "/") occurs as a word of code in that file, or one of those
#     files; `Name` (`file`...), (`Name`, `file`...) and `Name` in `file`: the name does (every part of
#     `A::b` or `A.b`, in one file). `path/*.cpp` globs over names and other projects' paths name no file.
# "The sources" are the text files under common/ agent/ launcher/ collectives/ cmd/ tests/ scripts/ cmake/
# and the top-level CMakeLists.txt, read once; words inside // and /* */ comments of C and C++ files
# and # comments of the others do not count (a name only a comment mentions is no longer code).
#   tests/design_names.sh SOURCE_DIR [DESIGN_FILE]   (DESIGN_FILE defaults to SOURCE_DIR/docs/DESIGN.md)
set -euo pipefail
# Names of other projects that DESIGN.md explains and hvrun's code does not use: Gloo's device and its
# thread, a setting of slurm.conf, the glibc function a race crashed in.
foreign="gloo::transport::tcp::Device Loop loop_ PropagateResourceLimits __gai_notify"
src=${1:?usage: design_names.sh SOURCE_DIR [DESIGN_FILE]}
cd "$src"
design=${2:-docs/DESIGN.md}
source_dirs=(common agent launcher collectives cmd tests scripts cmake)
top_dirs=$(find . -mindepth 1 -maxdepth 1 -type d ! -name .git ! -name .cache ! -name 'build*' -printf '%f\n' | sort | tr '\n' ' ')
rooms=$(find launcher -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | tr '\n' ' ')

# The sources: every regular file outside build trees and fuzz corpora that grep calls text.
mapfile -t files < <(find "${source_dirs[@]}" CMakeLists.txt -type f ! -path '*/regressions/*' \
                       ! -path '*/corpus/*' ! -path '*/crashes/*' -print | sort | xargs grep -lI '' --)

# One pass over the sources, one record a line:
#   w FILE WORD        each word of code (comments dropped; string literals kept: message names)
#   q A B              A::B written in code (a qualified name, a definition out of its class)
#   m FILE SCOPE NAME  NAME written at the top level of the body of class, struct, enum or namespace
#                      SCOPE in C and C++ files (a member, its type, an enumerator), not in a function
#   d FILE NAME        NAME declared or defined in C and C++ files: named by class, struct, union, enum
#                      or namespace (not a forward declaration), by #define, or an identifier followed by
#                      ( ; = { [ , or the end of its line outside any function body (a function, member,
#                      variable, constant or enumerator; `A::b(` out of its class declares b)
#   s FILE TEXT        each hyphenated or dotted run of characters, for file and program names
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '
  FNR == 1 { c_like = FILENAME ~ /\.(cpp|hpp|h|c|cc|in)$/; in_block = 0; depth = 0; pending = "" }
  {
    line = $0
    if (c_like) {
      out = ""
      while (line != "") {
        if (in_block) {
          end = index(line, "*/")
          if (!end) { line = ""; break }
          line = substr(line, end + 2); in_block = 0; continue
        }
        start = index(line, "/*"); slash = index(line, "//")
        if (slash && (!start || slash < start)) {
          # A // inside a string literal (a URL) is not a comment: keep the line if the quote count
          # before it is odd.
          before = substr(line, 1, slash - 1)
          if (gsub(/"/, "\"", before) % 2 == 0) { out = out substr(line, 1, slash - 1); line = ""; break }
          out = out substr(line, 1, slash + 1); line = substr(line, slash + 2); continue
        }
        if (start) { out = out substr(line, 1, start - 1); line = substr(line, start + 2); in_block = 1; continue }
        out = out line; line = ""
      }
      line = out
    } else {
      sub(/(^|[ \t])#.*$/, "", line)
    }
    rest = line
    while (match(rest, /[A-Za-z_][A-Za-z0-9_]*/)) {
      print "w", FILENAME, substr(rest, RSTART, RLENGTH)
      rest = substr(rest, RSTART + RLENGTH)
    }
    rest = line
    while (match(rest, /[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+/)) {
      n = split(substr(rest, RSTART, RLENGTH), part, "::")
      for (i = 1; i < n; i++) print "q", part[i], part[i + 1]
      rest = substr(rest, RSTART + RLENGTH)
    }
    if (c_like) {
      # Scopes: a brace opened after "class|struct|union|enum|namespace NAME" is NAME`s body, any
      # other brace (a function, a lambda, an initializer) is anonymous; a base clause between NAME and
      # the brace (": Base<NAME>", an enum`s ": int") is passed over. String literals are blanked
      # first so that their braces do not count.
      bare = line
      gsub(/"([^"\\]|\\.)*"/, "\"\"", bare); gsub(/'\''([^'\''\\]|\\.)*'\''/, "'\'''\''", bare)
      while (match(bare, /[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*|[{};()>=:]/)) {
        t = substr(bare, RSTART, RLENGTH); bare = substr(bare, RSTART + RLENGTH)
        if (t == "{") { scope[++depth] = pending; pending = ""; base = 0; continue }
        if (t == "}") { if (depth > 0) depth--; pending = ""; base = 0; continue }
        if (t == ";") base = 0
        if (base) continue
        if (t == ":") { if (pending != "" && pending != "?") base = 1; continue }
        if (t ~ /^[;()>=]$/) { pending = ""; continue }
        if (t ~ /^(class|struct|union|enum|namespace)$/) { pending = "?"; continue }
        if (t == "extern") { pending = "extern"; continue }
        if (pending == "?") {
          n = split(t, part, "::"); pending = part[n]
          if (bare !~ /^[ \t]*;/) print "d", FILENAME, pending
          continue
        }
        if (depth > 0 && scope[depth] != "") print "m", FILENAME, scope[depth], t
        if ((depth == 0 || scope[depth] != "") && bare ~ /^[ \t]*([(;={,]|\[|$)/) {
          n = split(t, part, "::"); print "d", FILENAME, part[n]
        }
      }
      if (match(line, /^[ \t]*#[ \t]*define[ \t]+[A-Za-z_][A-Za-z0-9_]*/)) {
        t = substr(line, RSTART, RLENGTH); sub(/.*[ \t]/, "", t); print "d", FILENAME, t
      }
    }
    rest = $0
    while (match(rest, /[A-Za-z0-9_]+([.-][A-Za-z0-9_]+)+/)) {
      print "s", FILENAME, substr(rest, RSTART, RLENGTH)
      rest = substr(rest, RSTART + RLENGTH)
    }
  }' "${files[@]}" | sort -u >"$tmp/index"

# The tree's files (for paths and file names), as paths from SOURCE_DIR.
find . \( -path './build*' -o -path ./.git -o -path ./.cache \) -prune -o -print | sed 's|^\./||' >"$tmp/tree"

# The spans of DESIGN_FILE, one per line: "SECTION<TAB>SPAN<TAB>BEFORE<TAB>UNIT<TAB>CELL". A span may run
# over a line break. BEFORE is the text between the previous span of its unit and this one; a unit is a
# paragraph, a heading or a table row; CELL counts the |s before the span in a table row (0 elsewhere).
awk '
  /^```/ { fenced = !fenced; next }
  fenced { next }
  /^$/ { open = 0; buf = ""; unit++; gap = ""; next }
  {
    line = $0
    heading = line ~ /^#+ /
    if (heading) { section = line; sub(/^#+ /, "", section); if (match(section, /^[0-9]+(\.[0-9]+)*/)) section = "§" substr(section, 1, RLENGTH) }
    table = line ~ /^\|/
    if (heading || table || after_unit) { unit++; gap = ""; row = ""; open = 0; buf = "" }
    after_unit = heading || table
    while ((tick = index(line, "`"))) {
      if (open) { buf = buf substr(line, 1, tick - 1); print section "\t" buf "\t" before "\t" unit "\t" cell; open = 0; buf = "" }
      else {
        before = gap substr(line, 1, tick - 1); gsub(/\t/, " ", before); gap = ""; open = 1; buf = ""
        row = row before; cell = table ? gsub(/\|/, "|", row) : 0
      }
      line = substr(line, tick + 1)
    }
    if (open) buf = buf line " "; else gap = gap line " "
  }' "$design" >"$tmp/spans"

awk -v foreign="$foreign" -v top_dirs="$top_dirs" -v rooms="$rooms" -v design="$design" -v files="${#files[@]}" -F'\t' '
  BEGIN {
    n = split(top_dirs, d, " "); for (i = 1; i <= n; i++) top[d[i]] = 1
    n = split(rooms, d, " "); for (i = 1; i <= n; i++) room[d[i]] = 1
    n = split(foreign, d, " "); for (i = 1; i <= n; i++) other[d[i]] = 1
  }
  FILENAME ~ /index$/ {
    split($0, f, " ")
    if (f[1] == "w") { word[f[3]] = 1; in_file[f[3]] = in_file[f[3]] SUBSEP f[2] }
    else if (f[1] == "q") qualified[f[2], f[3]] = 1
    else if (f[1] == "m") { member_in[f[3], f[4]] = member_in[f[3], f[4]] SUBSEP f[2]; has_member[f[4]] = 1 }
    else if (f[1] == "d") declared_in[f[3]] = declared_in[f[3]] SUBSEP f[2]
    else text[f[3]] = 1
    next
  }
  FILENAME ~ /tree$/ {
    path[$0] = 1; n = split($0, p, "/"); base[p[n]] = 1
    if (n > 1) folder[substr($0, 1, length($0) - length(p[n]) - 1)] = 1
    by_base[p[n]] = by_base[p[n]] SUBSEP $0; stem = p[n]; sub(/\..*/, "", stem); by_stem[stem] = by_stem[stem] SUBSEP $0
    next
  }
  # A glob of the tree: * matches within one path component.
  function exists(p,    re, q) {
    sub(/\/$/, "", p)
    if (p !~ /\*/) return (p in path)
    re = p; gsub(/[.+?()|{}^$]/, "\\\\&", re); gsub(/\*/, "[^/]*", re); re = "^" re "$"
    for (q in path) if (q ~ re) return 1
    return 0
  }
  function same_file(parts, n,    i, f, files, k, ok) {
    for (i = 1; i <= n; i++) if (!(parts[i] in word)) return 0
    k = split(in_file[parts[1]], files, SUBSEP)
    for (f = 2; f <= k; f++) {
      ok = 1
      for (i = 2; i <= n && ok; i++) if (index(in_file[parts[i]] SUBSEP, SUBSEP files[f] SUBSEP) == 0) ok = 0
      if (ok) return 1
    }
    return 0
  }
  # A::B: written so in code, or B a member of a scope A declared in a file where `first` occurs.
  function member_pair(a, b, first,    k, fs, i) {
    if ((a, b) in qualified) return 1
    k = split(member_in[a, b], fs, SUBSEP)
    for (i = 2; i <= k; i++) if (index(in_file[first] SUBSEP, SUBSEP fs[i] SUBSEP)) return 1
    return 0
  }
  function members(parts, n,    i) {
    for (i = 1; i <= n; i++) if (!(parts[i] in word)) return 0
    for (i = 1; i < n; i++) if (!member_pair(parts[i], parts[i + 1], parts[1])) return 0
    return 1
  }
  function bad(why) { printf "%s: `%s` %s\n", $1, $2, why; failed++ }
  function misplaced(span, why) { printf "%s: `%s` %s\n", $1, span, why; wrong++ }
  # The existence rules of the header; returns the kind of span: skip, path, file, id, member, word, bad.
  function kind_of(s,    n, p, rest, id, m, tmp, parts) {
    if (s == "" || s ~ /[ "'\''\\<%=$]/ || s ~ /^(-|\[|~\[|\/|~\/)/ || (s in other)) return "skip"
    if (s ~ /^[0-9.:]+$/ || s ~ /^0x[0-9a-fA-F]+$/) return "skip"
    if (s ~ /^[0-9a-f]+$/ && s ~ /[0-9]/ && length(s) >= 7 && length(s) <= 40) return "skip"
    if (s ~ /^[A-Z0-9_:*]+$/ && s ~ /[A-Z]/ && s ~ /[A-Z].*[A-Z]|_/) return "skip"
    if (s ~ /^[A-Za-z_][A-Za-z0-9_]*\([0-9]\)$/) return "skip"
    if (s ~ /\//) {
      n = split(s, p, "/")
      if (p[1] == "hvrun") {
        rest = substr(s, 7); names++
        if (!exists("collectives/include/" s) && !exists("common/" rest ".in")) bad("is not a file of collectives/include/hvrun/ nor made from common/" rest ".in")
      } else if (p[1] in top) {
        names++; if (!exists(s)) bad("is not in the tree")
      } else if (p[1] in room) {
        names++; if (!exists("launcher/" s)) bad("is not in the tree (read as launcher/" s ")")
      } else return "skip"
      return "path"
    }
    if (s ~ /^[A-Za-z0-9_]+\.\*$/) {
      names++; if (!exists("*/" s) && !exists("*/*/" s) && !exists("*/*/*/" s) && !exists(s)) bad("is no file of the tree")
      return "file"
    }
    if (s ~ /\.(cpp|hpp|h|cc|c|sh|md|py|txt|in|so)$/) {
      names++; if (!(s in base) && !(s in text)) bad("is no file of the tree and the sources do not name it")
      return "file"
    }
    id = s; sub(/(\(\)|\([^()]*\)|\{[^{}]*\})$/, "", id); sub(/^~/, "", id)
    if (id ~ /^\*::[A-Za-z_][A-Za-z0-9_]*$/) {
      names++; m = substr(id, 4); if (!(m in has_member)) bad("names a member `" m "` no class has")
      return "member"
    }
    if (id ~ /^[A-Za-z_][A-Za-z0-9_]*((::|\.)[A-Za-z_][A-Za-z0-9_]*)*$/) {
      names++; tmp = id; gsub(/::|\./, " ", tmp); n = split(tmp, parts, " ")
      if (n == 1) { if (!(id in word)) bad("occurs nowhere in the sources") }
      else if (id ~ /::/ || id ~ /^[A-Z]/) { if (!members(parts, n)) bad("is no member the code declares") }
      else if (!same_file(parts, n)) bad("has parts that no source file holds together")
      return "id"
    }
    if (s ~ /^[A-Za-z0-9_]+(-[A-Za-z0-9_]+)+$/) {
      names++; if (!(s in text)) bad("occurs nowhere in the sources")
      return "word"
    }
    bad("is no kind of span tests/design_names.sh knows: give it a rule there")
    return "bad"
  }
  function has(list, f) { return index(list SUBSEP, SUBSEP f SUBSEP) > 0 }
  # The files (not folders) of the tree that a path or glob names, each after a SUBSEP.
  function matching(p,    re, q, r) {
    if (p !~ /\*/) return (p in path) && !(p in folder) ? SUBSEP p : ""
    re = p; gsub(/[.+?()|{}^$]/, "\\\\&", re); gsub(/\*/, "[^/]*", re); re = "^" re "$"
    for (q in path) if (q ~ re && !(q in folder)) r = r SUBSEP q
    return r
  }
  # The files a path span names: a file, or a file and its pair (`teardown.*`); "" for a folder, a
  # glob over names (`tests/test_*.cpp`) or another project`s path.
  function path_files(s,    n, p) {
    n = split(s, p, "/")
    if (p[n] !~ /^[A-Za-z0-9_-]+\.([A-Za-z0-9_.]+|\*)$/) return ""
    if (p[1] == "hvrun") return matching("collectives/include/" s) matching("common/" substr(s, 7) ".in")
    if (p[1] in top) return matching(s)
    if (p[1] in room) return matching("launcher/" s)
    return ""
  }
  # The files named `name` (`stem.*`: of that stem) in folder f or below it (anywhere when f is "").
  function files_under(f, name,    list, k, q, i, r) {
    if (name ~ /\.\*$/) list = by_stem[substr(name, 1, length(name) - 2)]; else list = by_base[name]
    k = split(list, q, SUBSEP)
    for (i = 2; i <= k; i++) if (!(q[i] in folder) && (f == "" || index(q[i], f "/") == 1)) r = r SUBSEP q[i]
    return r
  }
  function shown(fs, pattern,    q) { return split(fs, q, SUBSEP) == 2 ? q[2] : pattern }
  # Whether some file of fs has every part of the identifier span s as a word of code; with declared,
  # that file also declares the last part.
  function held(s, fs, declared,    id, n, parts, k, q, i, j, ok) {
    id = s; sub(/(\(\)|\([^()]*\)|\{[^{}]*\})$/, "", id); sub(/^~/, "", id)
    n = split(id, parts, /::|\./); k = split(fs, q, SUBSEP)
    for (j = 2; j <= k; j++) {
      ok = 1
      for (i = 1; i <= n && ok; i++) if (!has(in_file[parts[i]], q[j])) ok = 0
      if (ok && declared && !has(declared_in[parts[n]], q[j])) ok = 0
      if (ok) return 1
    }
    return 0
  }
  # Whether every part of the identifier span s occurs in the code of some file below folder f.
  function in_folder(s, f,    id, n, parts, k, q, i, j, ok) {
    id = s; sub(/(\(\)|\([^()]*\)|\{[^{}]*\})$/, "", id); sub(/^~/, "", id)
    n = split(id, parts, /::|\./)
    for (i = 1; i <= n; i++) {
      k = split(in_file[parts[i]], q, SUBSEP); ok = 0
      for (j = 2; j <= k && !ok; j++) if (index(q[j], f "/") == 1) ok = 1
      if (!ok) return 0
    }
    return 1
  }
  # Where a name lives (the second set of rules of the header). A unit is a paragraph, heading or
  # table row; `layout` is the folder of a layout row of section 1.1, "" elsewhere.
  function place(s, before, unit, cell, kind, ok,    g, f, fs, prev_files) {
    if (unit != cur_unit) {
      cur_unit = unit; layout = ""; room_row = 0; row_of = 0; depth = 0; first = 1
      owner_files = ""; list_files = ""; last = ""; last_kind = ""; last_ok = 0; last_before = ""
    }
    g = before
    if (index(g, "|")) { sub(/.*\|/, "", g); depth = 0 }
    depth += gsub(/\(/, "(", g) - gsub(/\)/, ")", g); if (depth < 0) depth = 0
    prev_files = owner_files; owner_files = ""
    if (first) {
      first = 0; f = s; sub(/\/$/, "", f)
      if ($1 == "§1.1" && s ~ /^[a-z_]+\/$/ && (cell == 1 || before ~ /\*\* \($/)) {
        if (f in top) layout = f; else if (cell == 1 && (f in room)) { layout = "launcher/" f; room_row = 1 }
        row_of = cell == 1
      }
    } else if (ok && layout != "") {
      if (kind == "file" && s ~ /\.(cpp|hpp|h|cc|c|\*)$/) {
        places++
        if (files_under(layout, s) == "") misplaced(s, "is no file of " layout "/ (the folder of its " (row_of ? "row" : "paragraph") ")")
      } else if (room_row && cell == 3 && depth == 0 && kind == "id" && s ~ /^[a-z_][a-z0-9_]*$/) {
        # A stem of a room`s row: launcher/ROOM/stem.*, which owns the list after it.
        places++; fs = files_under(layout, s ".*")
        if (fs == "") misplaced(s, "is no file of " layout "/ (its room): there is no " layout "/" s ".*")
        else { owner_files = fs; owner_where = layout "/" s ".*"; owner_strict = 1 }
        kind = "stem"
      } else if (row_of && cell >= 2 && depth == 0 && kind == "id") {
        places++
        if (!in_folder(s, layout)) misplaced(s, "occurs nowhere in the code of " layout "/ (the folder of its row)")
      }
    }
    # A file (`path/file.hpp`, `file.cpp`, `teardown.*`) owns the list of names after it.
    if (ok && kind == "path") { fs = path_files(s); if (fs != "") { owner_files = fs; owner_where = s; owner_strict = layout != "" } }
    if (ok && kind == "file" && s ~ /\.(cpp|hpp|h|cc|c|in|\*)$/) {
      # In a layout row a .cpp stands for its pair: the header declares what the .cpp defines.
      f = layout != "" && s ~ /\.cpp$/ ? substr(s, 1, length(s) - 3) "*" : s
      fs = files_under(layout, f); if (fs != "") { owner_files = fs; owner_where = f; owner_strict = layout != "" }
    }
    # `file` (`Name`, `Other`/`More`, ...) and `file`s `Name`: the names are in that file.
    if (prev_files != "" && (before == " (" || before == "'\''s ")) { list_files = prev_files; list_where = prev_where; list_strict = prev_strict }
    else if (list_files != "" && before !~ /^(, |\/)$/) list_files = ""
    if (list_files != "" && kind == "id" && ok) {
      places++
      if (!held(s, list_files, list_strict)) {
        if (list_strict) misplaced(s, "is not declared in " shown(list_files, list_where) " (the file its " (row_of ? "row" : "paragraph") " lists it under)")
        else misplaced(s, "does not occur in the code of " shown(list_files, list_where) " (the file it is listed under)")
      }
    }
    # `Name` (`path/file`...), (`Name`, `path/file`...) and `Name` in `path/file`: the name is in that file.
    if (owner_files != "" && kind != "stem" && last_kind == "id" && last_ok &&
        (before == " (" || before == " in " || (before == ", " && last_before ~ /\($/))) {
      places++
      if (!held(last, owner_files, 0)) misplaced(last, "does not occur in the code of " shown(owner_files, owner_where) " (where the text puts it)")
    }
    if (owner_files != "") { prev_where = owner_where; prev_strict = owner_strict }
    last = s; last_kind = kind; last_ok = ok; last_before = before
  }
  {
    before_failed = failed
    kind = kind_of($2)
    place($2, $3, $4, $5 + 0, kind, failed == before_failed)
  }
  END {
    if (failed) printf "design_names: %d of %d names in %s are not in the code (above): the code is right, fix the file\n", failed, names, design
    else printf "design_names: %d names, %d files checked: every one is in the code\n", names, files
    if (wrong) printf "design_names: %d of %d places in %s are not where the code has the name (above): the code is right, fix the file\n", wrong, places, design
    else printf "design_names: %d places checked: every name is where the file says\n", places
    exit failed + wrong > 0
  }
' "$tmp/index" "$tmp/tree" "$tmp/spans"
