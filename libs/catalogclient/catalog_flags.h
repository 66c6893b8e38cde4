#pragma once

// The --catalog_address flag shared by the catalog's followers (materializer, splicer), which
// either follow the catalog or run from a static description given by another flag.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reverser::catalogclient {

// The catalog address, or "" when the static alternative is used. InvalidArgument unless exactly
// one of --catalog_address and `static_flag` (its name, for the message) is set.
absl::StatusOr<std::string> CatalogAddressOrStatic(absl::string_view static_flag,
                                                   absl::string_view static_value);

}  // namespace reverser::catalogclient
