#pragma once

// Remote URLs may carry credentials (`https://user:token@host/repo.git`); every message that
// names a remote (logs, errors, status conditions) names it through RedactUrl.

#include <string>

#include "absl/strings/string_view.h"

namespace reverser::core {

// `url` with the user information of a `scheme://userinfo@host...` URL replaced by `***`
// (user names are often tokens too). Other forms (`git@host:path`, paths) are returned as they
// are: their user part is an account name, never a secret.
std::string RedactUrl(absl::string_view url);

}  // namespace reverser::core
