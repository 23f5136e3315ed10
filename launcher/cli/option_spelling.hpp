#pragma once
// The single-dash long words horovodrun and mpirun users type (-np 4, -hostfile FILE, -host a,b,
// -cb, -oversubscribe, ...) turned into the options CLI11 knows, before it parses. CLI11 reads a
// single-dash word as packed short flags, so `-hostfile` would become -h (help) and exit 0.
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace hvrun {

// Rewrites the words before the command (the first word that is neither an option nor an option's
// value, or `--`): `-np`/`-cb`/`-prefix-timestamp` to their long options, and any `-word` or `-word=V`
// whose `--word` is an option of `app`, to `--word`/`--word=V`. A single-dash word longer than two
// characters is otherwise kept only as a short option with its value attached (`-Ha:2`, `-p2222`);
// anything else throws UsageError: "unknown option '-hostfiel' (did you mean --hostfile?)". The
// command and everything after it are returned unchanged, so positions stay the same.
std::vector<std::string> normalize_option_words(const std::vector<std::string>& args, const CLI::App& app);

// The single-dash spellings that normalize_option_words turns into `long_name` ("--num-proc": -np), for
// the help to show beside the names CLI11 knows.
std::vector<std::string> single_dash_aliases(std::string_view long_name);

// The option of `app` spelled closest to `word` (edit distance over every long and short name), as the
// user would type it: "--hostfile".
std::string closest_option(std::string_view word, const CLI::App& app);

}  // namespace hvrun
