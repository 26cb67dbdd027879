#include "flags.h"

#include <charconv>

#include "cli_error.h"

namespace moegrad::cli {
namespace {

std::string see_help(std::string_view command) {
  return " (see 'moegrad " + std::string(command) + " --help')";
}

}  // namespace

std::optional<int64_t> parse_int64(std::string_view text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  // from_chars already refuses "+1", " 1", "0x1"; checking ptr == last
  // refuses "12x" and "1.5".
  const auto [ptr, ec] = std::from_chars(first, last, value, 10);
  if (text.empty() || ec != std::errc() || ptr != last || value < lo || value > hi) {
    return std::nullopt;
  }
  return value;
}

ParsedFlags ParsedFlags::parse(std::string_view command, std::span<const FlagSpec> specs,
                               std::span<char* const> args) {
  ParsedFlags out;
  out.command_ = std::string(command);
  // --help wins over every other error, wherever it stands, but not where it
  // is a flag's value as the loop below reads it: `--out -h` names a file.
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a(args[i]);
    if (a == "--help" || a == "-h") {
      out.help_ = true;
      return out;
    }
    for (const FlagSpec& s : specs)
      if (s.takes_value && s.name == a && i + 1 < args.size() && !std::string_view(args[i + 1]).starts_with("--"))
        ++i;
  }

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg(args[i]);
    if (!arg.starts_with("--")) {
      usage_error(std::string(command) + ": unexpected argument '" + std::string(arg) + "'" +
                  see_help(command));
    }
    const std::size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      usage_error(std::string(command) + ": unknown flag '" + std::string(name) + "'" +
                  see_help(command));
    }
    if (out.has(name))
      usage_error(std::string(command) + ": " + std::string(name) + " given twice");

    std::string value;
    if (!spec->takes_value) {
      if (eq != std::string_view::npos) {
        usage_error(std::string(command) + ": " + std::string(name) + " takes no value");
      }
    } else if (eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < args.size() && !std::string_view(args[i + 1]).starts_with("--")) {
      value = args[++i];
    } else {
      usage_error(std::string(command) + ": " + std::string(name) + " needs a value");
    }
    if (spec->takes_value && value.empty()) {
      usage_error(std::string(command) + ": " + std::string(name) + " needs a non-empty value");
    }
    out.values_.emplace_back(std::string(name), std::move(value));
  }
  return out;
}

bool ParsedFlags::has(std::string_view name) const {
  for (const auto& [n, v] : values_) {
    if (n == name) return true;
  }
  return false;
}

std::optional<std::string> ParsedFlags::text(std::string_view name) const {
  for (const auto& [n, v] : values_) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string ParsedFlags::required_text(std::string_view name) const {
  std::optional<std::string> v = text(name);
  if (!v) {
    usage_error(command_ + ": missing required flag " + std::string(name) + see_help(command_));
  }
  return *v;
}

std::optional<int64_t> ParsedFlags::integer(std::string_view name, int64_t lo, int64_t hi) const {
  const std::optional<std::string> v = text(name);
  if (!v) return std::nullopt;
  if (std::optional<int64_t> n = parse_int64(*v, lo, hi)) return n;
  // Tell "not a number" apart from "out of range": the fix differs.
  const std::string_view digits = std::string_view(*v).substr(v->starts_with('-') ? 1 : 0);
  const bool is_integer = !digits.empty() && digits.find_first_not_of("0123456789") == digits.npos;
  usage_error(command_ + ": " + std::string(name) + " '" + *v + "' is " +
              (is_integer ? "out of range" : "not a decimal integer") + " (expected " +
              std::to_string(lo) + " to " + std::to_string(hi) + ")");
}

int64_t ParsedFlags::required_integer(std::string_view name, int64_t lo, int64_t hi) const {
  (void)required_text(name);
  return *integer(name, lo, hi);
}

std::string ParsedFlags::choice(std::string_view name,
                                std::initializer_list<std::string_view> choices,
                                std::string_view fallback) const {
  const std::optional<std::string> v = text(name);
  if (!v) return std::string(fallback);
  std::string allowed;
  for (std::string_view c : choices) {
    if (c == *v) return *v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(c);
  }
  usage_error(command_ + ": " + std::string(name) + " '" + *v + "' is not one of " + allowed);
}

}  // namespace moegrad::cli
