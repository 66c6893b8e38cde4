#include "libs/catalogclient/catalog_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, catalog_address, "", "gRPC address of the catalog to follow (host:port).");

namespace reverser::catalogclient {

absl::StatusOr<std::string> CatalogAddressOrStatic(absl::string_view static_flag,
                                                   absl::string_view static_value) {
  std::string catalog = absl::GetFlag(FLAGS_catalog_address);
  if (catalog.empty() == static_value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("set exactly one of --catalog_address and --", static_flag));
  }
  return catalog;
}

}  // namespace reverser::catalogclient
