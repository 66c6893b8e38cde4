// A `.sops.yaml` file read from Git (libs/sops) is untrusted: anyone who can push chooses its
// bytes, and anyone who knows a recipient's public key can even make a file that decrypts. Every
// input parses with sops' YAML typing or is refused; what parses is emitted the way the writer
// lays files out and reads back the same; and every input goes through the reader that unwraps
// the data key with the fixed test identities below, decrypts and verifies the MAC.

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "libs/sops/age.h"
#include "libs/sops/secret_file.h"
#include "libs/sops/sops.h"
#include "libs/sops/sops_yaml.h"

namespace reverser::fuzz {
namespace {

// Published test identities (never used for real secrets; see fuzz/corpus/SOURCES.md): the
// fluxcd/kustomize-controller test key and the key of the repository's generated test file. The
// seeds encrypted to them reach value decryption and the MAC check.
constexpr const char* kTestIdentities[] = {
    "AGE-SECRET-KEY-1RH87A5Z54ZGUR9S0AS3R6WHFSEFNPLYMAKF5Z2CEU7R06VRJ0A3Q7242AM",
    "AGE-SECRET-KEY-1GUCYJESN6KYASPXAHPY2FH405V4S4HS8ZSGWQS8KRPMUZHY2G4CSKT47L7",
};

const std::vector<sops::age::X25519Identity>& Identities() {
  static const auto* identities = [] {
    auto* list = new std::vector<sops::age::X25519Identity>;
    for (const char* key : kTestIdentities) {
      auto identity = sops::age::X25519Identity::Parse(key);
      FUZZ_CHECK(identity.ok());
      list->push_back(*identity);
    }
    return list;
  }();
  return *identities;
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const absl::string_view text = fuzz::AsText(data, size);
  if (auto tree = sops::ParseSopsYaml(text); tree.ok()) {
    if (auto emitted = sops::EmitSopsYaml(*tree); emitted.ok()) {
      auto again = sops::ParseSopsYaml(*emitted);
      FUZZ_CHECK(again.ok());
      FUZZ_CHECK(*again == *tree);
    }
  }
  sops::LooksLikeSopsYaml(text);
  if (auto object = sops::DecryptSecretYaml(text, fuzz::Identities()); object.ok()) {
    FUZZ_CHECK(object->is_object());
    FUZZ_CHECK(!object->contains("sops"));
  }
  return 0;
}
