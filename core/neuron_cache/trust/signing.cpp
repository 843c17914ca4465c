#include "neuron_cache/trust/signing.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "neuron_cache/error.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/trust/ed25519.h"

namespace neuron_cache::trust {
namespace {

namespace ai = artifact_index;
using pyjson::Json;

struct SignedFile {
  std::string path;
  const ai::FileRecord* record;
};

// Paths relative to the compiler folder, as a reader installs them.
std::vector<SignedFile> signed_files(const ai::Entry& entry) {
  std::vector<SignedFile> files;
  for (const auto& module : entry.modules) {
    for (const auto& file : module.files) files.push_back({module.name + "/" + file.name, &file});
  }
  for (const auto& file : entry.registry) files.push_back({file.name, &file});
  // Byte order is code point order in UTF-8, so Python's sorted() by "path" agrees.
  std::sort(files.begin(), files.end(),
            [](const SignedFile& a, const SignedFile& b) { return a.path < b.path; });
  return files;
}

// Every key is named: a list never holds more than an entry's signatures.
std::string join(const std::vector<std::string>& names) {
  return list_of(names, ai::kMaxSignatures);
}

std::optional<ed25519::SignatureBytes> signature_bytes(const std::string& text) {
  std::optional<std::string> bytes = base64_decode(text);
  if (!bytes || bytes->size() != kSignatureBytes) return std::nullopt;
  ed25519::SignatureBytes out{};
  std::memcpy(out.data(), bytes->data(), out.size());
  return out;
}

}  // namespace

std::string canonical_statement(const ai::Entry& entry) {
  Json files = Json::array();
  for (const auto& file : signed_files(entry)) {
    files.push_back(
        {{"path", file.path}, {"size", file.record->size}, {"sha256", file.record->sha256}});
  }
  Json statement = {{"statement", kStatementKind},
                    {"key", entry.key},
                    {"compiler_version", entry.inputs.compiler_version},
                    {"inputs", cache_key::to_json(entry.inputs)},
                    {"files", files}};
  return pyjson::dumps(statement);
}

Signature sign_entry(const ai::Entry& entry, const SecretKey& key) {
  ed25519::SignatureBytes bytes = ed25519::sign(key.secret_seed(), canonical_statement(entry));
  return {key.name(), base64_encode(bytes.data(), bytes.size())};
}

void add_signature(ai::Entry& entry, Signature signature) {
  check_key_name(signature.key);
  auto same_key = [&](const Signature& s) { return s.key == signature.key; };
  auto at = std::find_if(entry.signatures.begin(), entry.signatures.end(), same_key);
  if (at != entry.signatures.end()) {
    *at = std::move(signature);
    return;
  }
  if (entry.signatures.size() >= ai::kMaxSignatures) {
    throw input_error("entry " + entry.key + " already carries " +
                      std::to_string(ai::kMaxSignatures) +
                      " signatures, the most an entry may: " + "no key is added to it");
  }
  entry.signatures.push_back(std::move(signature));
}

Verdict::Outcome Verdict::outcome() const {
  if (!bad.empty()) return Outcome::BadSignature;
  if (!valid.empty()) return Outcome::Trusted;
  if (!unknown.empty()) return Outcome::UnknownKeys;
  return Outcome::Unsigned;
}

std::string Verdict::reason() const {
  switch (outcome()) {
    case Outcome::Trusted:
      return "signed by trusted key " + join(valid);
    case Outcome::Unsigned:
      return "unsigned";
    case Outcome::UnknownKeys:
      return "signed only by keys that are not trusted: " + join(unknown);
    case Outcome::BadSignature:
      break;
  }
  return "bad signature by trusted key " + join(bad) +
         ": the entry's files, inputs or key changed after it was signed";
}

Verdict verify_entry(const ai::Entry& entry, const TrustedKeys& trusted) {
  Verdict verdict;
  std::optional<std::string> statement;  // made once, and only when a trusted key signed
  for (const auto& signature : entry.signatures) {
    const PublicKey* key = trusted.find(signature.key);
    if (!key) {
      verdict.unknown.push_back(signature.key);
      continue;
    }
    if (!statement) statement = canonical_statement(entry);
    auto bytes = signature_bytes(signature.sig);
    bool valid = bytes && ed25519::verify(key->bytes, *statement, *bytes);
    (valid ? verdict.valid : verdict.bad).push_back(signature.key);
  }
  return verdict;
}

}  // namespace neuron_cache::trust
