// Strict command-line flags for the subcommands. Other tools drive the CLI, so
// a typo must fail loudly instead of being ignored: unknown flags, repeated
// flags, missing values and numbers with trailing junk ("12x") are all usage
// errors (exit 2).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moegrad::cli {

struct FlagSpec {
  std::string_view name;  // with the dashes: "--batch"
  bool takes_value;       // false: a switch such as "--bf16"
};

class ParsedFlags {
 public:
  // `command` names the subcommand in messages. Accepts "--flag value" and
  // "--flag=value". A value may not start with "--" (use the "=" form), so a
  // forgotten value reads as "needs a value" rather than eating the next flag.
  static ParsedFlags parse(std::string_view command, std::span<const FlagSpec> specs,
                           std::span<char* const> args);

  // True if "--help" or "-h" appears anywhere: help wins over every other error.
  bool help() const noexcept { return help_; }
  bool has(std::string_view name) const;

  std::optional<std::string> text(std::string_view name) const;
  std::string required_text(std::string_view name) const;

  // Decimal integers in [lo, hi]; anything else is a usage error.
  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const;
  int64_t required_integer(std::string_view name, int64_t lo, int64_t hi) const;

  // One of `choices`, or `fallback` when the flag is absent.
  std::string choice(std::string_view name, std::initializer_list<std::string_view> choices,
                     std::string_view fallback) const;

 private:
  std::string command_;
  std::vector<std::pair<std::string, std::string>> values_;  // name -> value ("" for switches)
  bool help_ = false;
};

// Parses all of `text` as a decimal int64 in [lo, hi]; nullopt otherwise.
std::optional<int64_t> parse_int64(std::string_view text, int64_t lo, int64_t hi);

}  // namespace moegrad::cli
