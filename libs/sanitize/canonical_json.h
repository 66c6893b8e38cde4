#pragma once

// The byte encoding Go's encoding/json.Marshal gives a decoded (unstructured) object: compact,
// object keys sorted bytewise, Go's string escaping (including the HTML-safe \u003c \u003e
// \u0026 and \u2028 \u2029), integers in decimal and floats in Go's shortest form. Used for
// content hashes so equal content always gives equal bytes.

#include <string>

#include "nlohmann/json.hpp"

namespace reverser::sanitize {

std::string CanonicalJson(const nlohmann::json& value);

}  // namespace reverser::sanitize
