// Just enough of a JSON reader to assert that `moegrad run --json` prints one
// well-formed object (RFC 8259 grammar, values not interpreted).
#pragma once

#include <string_view>

namespace moegrad::cli_test {

// True if `text` is exactly one JSON object, surrounded by optional whitespace.
bool is_single_json_object(std::string_view text);

}  // namespace moegrad::cli_test
