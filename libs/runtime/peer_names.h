#pragma once

// Who is on the other end of a mutual-TLS connection: the names its certificate carries. A
// CA-signed certificate proves only that the CA issued it; servers also check the name.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

typedef struct ssl_st SSL;

namespace reverser::runtime {

// The subject's common name and every DNS and URI subject alternative name of the peer's
// certificate on `ssl`, in that order. Empty when there is no verified peer certificate.
std::vector<std::string> PeerCertificateNames(const SSL* ssl);

// Whether one of `names` is in `allowed`; the entry "*" allows any name.
bool AnyNameAllowed(const std::vector<std::string>& names,
                    const std::vector<std::string>& allowed);

}  // namespace reverser::runtime
