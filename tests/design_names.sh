#!/usr/bin/env bash
# docs/DESIGN.md says the code is right wherever the two differ; this keeps the file's names true
# (ctest: design_names). Every `backticked` span of the file is read (fenced ``` blocks are not) and
# sorted by these rules, in this order:
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
#     file generated from agent/NAME.in). It must exist; `*` in it is a glob (`launcher/job/job.*`).
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
# "The sources" are the text files under agent/ launcher/ collectives/ cmd/ tests/ scripts/ cmake/
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
source_dirs=(agent launcher collectives cmd tests scripts cmake)
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
        if (pending == "?") { n = split(t, part, "::"); pending = part[n]; continue }
        if (depth > 0 && scope[depth] != "") print "m", FILENAME, scope[depth], t
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

# The spans of DESIGN_FILE, one per line: "SECTION<TAB>SPAN". A span may run over a line break.
awk '
  /^```/ { fenced = !fenced; next }
  fenced { next }
  /^#+ / { section = $0; sub(/^#+ /, "", section); if (match(section, /^[0-9]+(\.[0-9]+)*/)) section = "§" substr(section, 1, RLENGTH); next }
  /^$/ { open = 0; buf = ""; next }
  {
    line = $0
    while ((tick = index(line, "`"))) {
      if (open) { buf = buf substr(line, 1, tick - 1); print section "\t" buf; open = 0; buf = "" }
      else { open = 1; buf = "" }
      line = substr(line, tick + 1)
    }
    if (open) buf = buf line " "
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
    else text[f[3]] = 1
    next
  }
  FILENAME ~ /tree$/ { path[$0] = 1; n = split($0, p, "/"); base[p[n]] = 1; next }
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
  {
    s = $2
    if (s == "" || s ~ /[ "'\''\\<%=$]/ || s ~ /^(-|\[|~\[|\/|~\/)/ || (s in other)) next
    if (s ~ /^[0-9.:]+$/ || s ~ /^0x[0-9a-fA-F]+$/) next
    if (s ~ /^[0-9a-f]+$/ && s ~ /[0-9]/ && length(s) >= 7 && length(s) <= 40) next
    if (s ~ /^[A-Z0-9_:*]+$/ && s ~ /[A-Z]/ && s ~ /[A-Z].*[A-Z]|_/) next
    if (s ~ /^[A-Za-z_][A-Za-z0-9_]*\([0-9]\)$/) next
    if (s ~ /\//) {
      n = split(s, p, "/")
      if (p[1] == "hvrun") {
        rest = substr(s, 7); names++
        if (!exists("collectives/include/" s) && !exists("agent/" rest ".in")) bad("is not a file of collectives/include/hvrun/ nor made from agent/" rest ".in")
      } else if (p[1] in top) {
        names++; if (!exists(s)) bad("is not in the tree")
      } else if (p[1] in room) {
        names++; if (!exists("launcher/" s)) bad("is not in the tree (read as launcher/" s ")")
      }
      next
    }
    if (s ~ /^[A-Za-z0-9_]+\.\*$/) {
      names++; if (!exists("*/" s) && !exists("*/*/" s) && !exists("*/*/*/" s) && !exists(s)) bad("is no file of the tree")
      next
    }
    if (s ~ /\.(cpp|hpp|h|cc|c|sh|md|py|txt|in|so)$/) {
      names++; if (!(s in base) && !(s in text)) bad("is no file of the tree and the sources do not name it")
      next
    }
    id = s; sub(/(\(\)|\([^()]*\)|\{[^{}]*\})$/, "", id); sub(/^~/, "", id)
    if (id ~ /^\*::[A-Za-z_][A-Za-z0-9_]*$/) {
      names++; m = substr(id, 4); if (!(m in has_member)) bad("names a member `" m "` no class has")
      next
    }
    if (id ~ /^[A-Za-z_][A-Za-z0-9_]*((::|\.)[A-Za-z_][A-Za-z0-9_]*)*$/) {
      names++; tmp = id; gsub(/::|\./, " ", tmp); n = split(tmp, parts, " ")
      if (n == 1) { if (!(id in word)) bad("occurs nowhere in the sources") }
      else if (id ~ /::/ || id ~ /^[A-Z]/) { if (!members(parts, n)) bad("is no member the code declares") }
      else if (!same_file(parts, n)) bad("has parts that no source file holds together")
      next
    }
    if (s ~ /^[A-Za-z0-9_]+(-[A-Za-z0-9_]+)+$/) {
      names++; if (!(s in text)) bad("occurs nowhere in the sources")
      next
    }
    bad("is no kind of span tests/design_names.sh knows: give it a rule there")
  }
  END {
    if (failed) printf "design_names: %d of %d names in %s are not in the code (above): the code is right, fix the file\n", failed, names, design
    else printf "design_names: %d names, %d files checked: every one is in the code\n", names, files
    exit failed > 0
  }
' "$tmp/index" "$tmp/tree" "$tmp/spans"
