#include "libs/runtime/peer_names.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>

namespace reverser::runtime {
namespace {

std::string AsString(const ASN1_STRING* text) {
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     static_cast<size_t>(ASN1_STRING_length(text)));
}

}  // namespace

std::vector<std::string> PeerCertificateNames(const SSL* ssl) {
  std::vector<std::string> names;
  if (ssl == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return names;
  std::unique_ptr<X509, decltype(&X509_free)> cert(SSL_get_peer_certificate(ssl), X509_free);
  if (!cert) return names;
  if (X509_NAME* subject = X509_get_subject_name(cert.get())) {
    const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (index >= 0) {
      names.push_back(AsString(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index))));
    }
  }
  auto* sans = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* san = sk_GENERAL_NAME_value(sans, i);
      if (san->type == GEN_DNS) names.push_back(AsString(san->d.dNSName));
      if (san->type == GEN_URI) names.push_back(AsString(san->d.uniformResourceIdentifier));
    }
    GENERAL_NAMES_free(sans);
  }
  // A name with a NUL byte inside is a forgery attempt, never a match.
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) { return n.find('\0') != n.npos; }),
              names.end());
  return names;
}

bool AnyNameAllowed(const std::vector<std::string>& names,
                    const std::vector<std::string>& allowed) {
  for (const std::string& entry : allowed) {
    if (entry == "*") return true;
    if (std::find(names.begin(), names.end(), entry) != names.end()) return true;
  }
  return false;
}

}  // namespace reverser::runtime
