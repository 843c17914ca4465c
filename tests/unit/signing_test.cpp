// Signed index entries (trust/): key names and key texts read strictly, secret key files written
// and read safely, signatures that verify only over the exact files and inputs they were made
// for, and the canonical statement and signatures checked against independent implementations:
// CPython's json for the statement, the openssl command line for Ed25519, and the worked vector
// in tests/data/signing/vector.json (docs/formats.md, "Signed entries").
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "index_samples.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/trust/keys.h"
#include "neuron_cache/trust/signing.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace ai = artifact_index;
namespace fs = std::filesystem;
using pyjson::Json;
using trust::Verdict;

const fs::path kVectorFile = fs::path(NEURON_CACHE_TESTS_DIR) / "data/signing/vector.json";

Json vector() {
  return pyjson::parse(testing::read_file(kVectorFile));
}

ai::Entry sample_entry() {
  return testing::sample_index_entry(testing::sample_key_inputs("meta-llama/Llama-3.1-8B"),
                                     "llama-bs4");
}

trust::TrustedKeys trusting(const std::vector<trust::PublicKey>& keys) {
  trust::TrustedKeys trusted;
  for (const auto& key : keys) trusted.add(key);
  return trusted;
}

ai::Entry signed_by(ai::Entry entry, const trust::SecretKey& key) {
  trust::add_signature(entry, trust::sign_entry(entry, key));
  return entry;
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

ErrorKind kind_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.kind();
  }
  ADD_FAILURE() << "no Error thrown";
  return ErrorKind::LocalDisk;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// --- key names and key texts ---

TEST(SigningKeys, NamesCarryANumber) {
  for (const char* good : {"acme-ci-1", "a-0", "k.e_y-12", "Acme-CI-2026"}) {
    EXPECT_FALSE(ai::key_name_problem(good)) << good;
  }
  std::string long_name = std::string(63, 'a') + "-1";
  for (const std::string& bad :
       {std::string(""), std::string("acme"), std::string("acme-"), std::string("-1"),
        std::string("acme-ci-x"), std::string("acme ci-1"), std::string("acme:ci-1"),
        std::string(".acme-1"), std::string("acme\n-1"), std::string("\xc3\xa9-1"), long_name}) {
    EXPECT_TRUE(ai::key_name_problem(bad)) << bad;
    EXPECT_EQ(kind_of([&] { trust::check_key_name(bad); }), ErrorKind::Input);
  }
  EXPECT_NE(message_of([] { trust::generate_key("acme"); }).find("acme-ci-1"), std::string::npos);
}

TEST(SigningKeys, Base64IsStrict) {
  std::vector<uint8_t> bytes;
  for (int size = 0; size < 40; ++size) {
    std::string text = trust::base64_encode(bytes.data(), bytes.size());
    auto back = trust::base64_decode(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, std::string(bytes.begin(), bytes.end()));
    bytes.push_back(static_cast<uint8_t>(size * 37 + 11));
  }
  for (const char* bad : {"A", "AB", "AB=", "AB==AB==", "====", "A===", "AA=A",
                          "AB==", "AAB=", "AA A", "AA-_", "AA\n=", "\xff\xff\xff\xff"}) {
    EXPECT_FALSE(trust::base64_decode(bad)) << bad;  // AB== and AAB= have unused bits set
  }
  EXPECT_EQ(trust::base64_decode("AA==").value(), std::string(1, '\0'));
}

TEST(SigningKeys, PublicKeyLineRoundTrips) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  trust::PublicKey pub = key.public_key();
  std::string line = trust::public_key_line(pub);
  EXPECT_TRUE(line.starts_with("acme-ci-1:"));
  EXPECT_EQ(line.size(), std::string("acme-ci-1:").size() + 44);
  EXPECT_EQ(trust::parse_public_key(line, "test"), pub);
  EXPECT_EQ(trust::parse_public_key("  " + line + "\n", "test"), pub);
  EXPECT_NE(trust::generate_key("acme-ci-1").public_key(), pub);  // a fresh key each time
}

TEST(SigningKeys, HostilePublicKeyLinesAreInputErrors) {
  std::string b32 = trust::base64_encode(std::vector<uint8_t>(32, 7).data(), 32);
  std::string b31 = trust::base64_encode(std::vector<uint8_t>(31, 7).data(), 31);
  std::string b33 = trust::base64_encode(std::vector<uint8_t>(33, 7).data(), 33);
  std::vector<std::string> bad = {"",
                                  ":",
                                  "acme-ci-1",
                                  "acme-ci-1:",
                                  b32,
                                  ":" + b32,
                                  "acme:" + b32,
                                  "acme-ci-1:" + b31,
                                  "acme-ci-1:" + b33,
                                  "acme-ci-1:" + b32.substr(1),
                                  "acme-ci-1:" + b32 + "=",
                                  "acme-ci-1:" + b32 + ":" + b32,
                                  "acme-ci-1: " + b32,
                                  "acme-ci-1:" + std::string(44, '*'),
                                  "acme-ci-1:" + std::string(1 << 20, 'A'),
                                  std::string(1 << 20, 'a') + "-1:" + b32,
                                  std::string("acme-ci-1\0:", 11) + b32};
  for (const auto& line : bad) {
    EXPECT_EQ(kind_of([&] { trust::parse_public_key(line, "trusted_keys[0]"); }), ErrorKind::Input)
        << line.substr(0, 80);
    std::string message = message_of([&] { trust::parse_public_key(line, "trusted_keys[0]"); });
    EXPECT_TRUE(message.starts_with("trusted_keys[0]: not a public key")) << message;
    EXPECT_LT(message.size(), 400u);  // a huge line is never echoed
  }
  std::mt19937 random(44);
  for (int i = 0; i < 2000; ++i) {
    std::string line = "acme-ci-1:" + b32;
    for (int edits = 1 + i % 4; edits > 0; --edits) {
      line[random() % line.size()] = static_cast<char>(random() % 256);
    }
    try {
      trust::parse_public_key(line, "fuzz");
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Input);
    }
  }
}

TEST(SigningKeys, TrustedKeysRefuseTwoKeysOfOneName) {
  trust::PublicKey one = trust::generate_key("acme-ci-1").public_key();
  trust::PublicKey other = trust::generate_key("acme-ci-1").public_key();
  trust::TrustedKeys trusted;
  trusted.add(one);
  trusted.add(one);  // the same line twice is harmless
  EXPECT_EQ(trusted.size(), 1u);
  EXPECT_NE(message_of([&] { trusted.add(other); }).find("acme-ci-2"), std::string::npos);
}

// --- secret key files ---

TEST(SigningKeys, SecretFileRoundTripsWithMode0600) {
  testing::TempDir dir;
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  mode_t old_mask = ::umask(0);  // the file is 0600 whatever the umask
  trust::write_secret_key(dir / "key.secret", key);
  ::umask(old_mask);
  struct stat info {};
  ASSERT_EQ(::stat((dir / "key.secret").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  std::string text = testing::read_file(dir / "key.secret");
  EXPECT_TRUE(text.starts_with("acme-ci-1:"));
  EXPECT_TRUE(text.ends_with("\n"));
  EXPECT_EQ(text.size(), std::string("acme-ci-1:").size() + 44 + 1);
  trust::SecretKey back = trust::read_secret_key(dir / "key.secret");
  EXPECT_EQ(back.name(), "acme-ci-1");
  EXPECT_EQ(back.public_key(), key.public_key());
}

TEST(SigningKeys, SecretFileNeverReplacesAFileNorFollowsASymlink) {
  testing::TempDir dir;
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  testing::write_file(dir / "existing", "keep me");
  EXPECT_NE(
      message_of([&] { trust::write_secret_key(dir / "existing", key); }).find("already exists"),
      std::string::npos);
  EXPECT_EQ(testing::read_file(dir / "existing"), "keep me");

  fs::create_symlink(dir / "target", dir / "dangling");
  EXPECT_EQ(kind_of([&] { trust::write_secret_key(dir / "dangling", key); }),
            ErrorKind::Operational);
  EXPECT_FALSE(fs::exists(dir / "target"));  // nothing written through the link

  fs::create_symlink(dir / "existing", dir / "to-existing");
  EXPECT_ANY_THROW(trust::write_secret_key(dir / "to-existing", key));
  EXPECT_EQ(testing::read_file(dir / "existing"), "keep me");

  trust::write_secret_key(dir / "real", key);
  fs::create_symlink(dir / "real", dir / "link");
  EXPECT_NE(message_of([&] { trust::read_secret_key(dir / "link"); }).find("symbolic link"),
            std::string::npos);
  EXPECT_EQ(kind_of([&] { trust::write_secret_key(dir / "missing-dir/key", key); }),
            ErrorKind::Operational);
}

TEST(SigningKeys, SecretFileReadableByOthersIsRefused) {
  testing::TempDir dir;
  trust::write_secret_key(dir / "key", trust::generate_key("acme-ci-1"));
  for (mode_t mode : {0640, 0604, 0644, 0660}) {
    fs::permissions(dir / "key", static_cast<fs::perms>(mode));
    std::string message = message_of([&] { trust::read_secret_key(dir / "key"); });
    EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
  }
  fs::permissions(dir / "key", static_cast<fs::perms>(0400));
  EXPECT_EQ(trust::read_secret_key(dir / "key").name(), "acme-ci-1");
  fs::create_directory(dir / "folder");
  fs::permissions(dir / "folder", static_cast<fs::perms>(0700));
  EXPECT_ANY_THROW(trust::read_secret_key(dir / "folder"));
  EXPECT_ANY_THROW(trust::read_secret_key(dir / "absent"));
}

// No message about a secret key file, well formed or not, quotes any part of the secret.
TEST(SigningKeys, TheSecretIsInNoMessage) {
  Json v = vector();
  std::string good = v["secret_key_file"].get<std::string>();
  std::string secret = good.substr(good.find(':') + 1, 44);
  std::vector<std::string> malformed = {
      secret + "\n",
      secret,
      "acme-ci-1:" + secret + "\n\n",
      "acme-ci-1:" + secret + " \n",
      "acme-ci-1:" + secret + "\r\n",
      "acme-ci-1:" + secret.substr(0, 40) + "\n",
      "acme-ci-1:" + secret + "AAAA\n",
      "acme:" + secret + "\n",
      "acme-ci-1 " + secret + "\n",
      secret + ":" + secret + "\n",
      "acme-ci-1:" + secret + "\n" + std::string(1000, 'x'),
  };
  testing::TempDir dir;
  int n = 0;
  for (const auto& text : malformed) {
    fs::path file = dir / ("key" + std::to_string(n++));
    testing::write_file(file, text);
    fs::permissions(file, static_cast<fs::perms>(0600));
    std::string message = message_of([&] { trust::read_secret_key(file); });
    EXPECT_EQ(message.find(secret.substr(0, 8)), std::string::npos) << message;
    EXPECT_EQ(message.find(secret.substr(20, 8)), std::string::npos) << message;
    EXPECT_NE(message.find("not a neuron-cache secret key"), std::string::npos) << message;
    message = message_of([&] { trust::parse_secret_key(text, "NEURON_CACHE_SIGNING_KEY"); });
    EXPECT_EQ(message.find(secret.substr(0, 8)), std::string::npos) << message;
  }
  fs::path open_file = dir / "open";
  testing::write_file(open_file, good);
  fs::permissions(open_file, static_cast<fs::perms>(0644));
  EXPECT_EQ(message_of([&] { trust::read_secret_key(open_file); }).find(secret.substr(0, 8)),
            std::string::npos);
}

// --- signing and verifying ---

TEST(Signing, ASignedEntryVerifiesWithItsKeyOnly) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  ai::Entry entry = signed_by(sample_entry(), key);
  Verdict verdict = trust::verify_entry(entry, trusting({key.public_key()}));
  EXPECT_EQ(verdict.outcome(), Verdict::Outcome::Trusted);
  EXPECT_EQ(verdict.reason(), "signed by trusted key acme-ci-1");

  Verdict unknown =
      trust::verify_entry(entry, trusting({trust::generate_key("other-1").public_key()}));
  EXPECT_EQ(unknown.outcome(), Verdict::Outcome::UnknownKeys);
  EXPECT_EQ(unknown.unknown, std::vector<std::string>{"acme-ci-1"});
  EXPECT_NE(unknown.reason().find("acme-ci-1"), std::string::npos);
  EXPECT_EQ(trust::verify_entry(entry, {}).outcome(), Verdict::Outcome::UnknownKeys);

  Verdict none = trust::verify_entry(sample_entry(), trusting({key.public_key()}));
  EXPECT_EQ(none.outcome(), Verdict::Outcome::Unsigned);
  EXPECT_EQ(none.reason(), "unsigned");
}

TEST(Signing, AnyChangeToWhatIsSignedMakesTheSignatureBad) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  trust::TrustedKeys trusted = trusting({key.public_key()});
  const ai::Entry entry = signed_by(sample_entry(), key);
  std::vector<std::pair<std::string, std::function<void(ai::Entry&)>>> changes = {
      {"a NEFF's sha256", [](ai::Entry& e) { e.modules[0].files[0].sha256[0] = 'f'; }},
      {"a NEFF's size", [](ai::Entry& e) { e.modules[0].files[0].size += 1; }},
      {"a registry file", [](ai::Entry& e) { e.registry[0].sha256 = std::string(64, 'd'); }},
      {"a file's name", [](ai::Entry& e) { e.modules[0].files[0].name = "model.log"; }},
      {"a module's name",
       [](ai::Entry& e) { e.modules[0].name = "MODULE_0123456789abcdef0124+d7517139"; }},
      {"an added module",
       [](ai::Entry& e) {
         e.modules.push_back({"MODULE_1+d7517139", {{"model.neff", 1, std::string(64, 'e')}}});
       }},
      {"a removed registry file", [](ai::Entry& e) { e.registry.clear(); }},
      {"the inputs",
       [](ai::Entry& e) {
         e.inputs.batch_size = 8;
         e.key = cache_key::key_of(e.inputs);
       }},
      {"the key", [](ai::Entry& e) { e.key = std::string(32, '0'); }},
      {"the compiler version",
       [](ai::Entry& e) {
         e.inputs.compiler_version = "2.22.0.0+00000000";
         e.key = cache_key::key_of(e.inputs);
       }},
  };
  for (const auto& [what, change] : changes) {
    ai::Entry changed = entry;
    change(changed);
    Verdict verdict = trust::verify_entry(changed, trusted);
    EXPECT_EQ(verdict.outcome(), Verdict::Outcome::BadSignature) << what;
    EXPECT_EQ(verdict.bad, std::vector<std::string>{"acme-ci-1"}) << what;
    EXPECT_NE(verdict.reason().find("bad signature by trusted key acme-ci-1"), std::string::npos);
  }
  // What is informative is not signed: a reader may rewrite it.
  ai::Entry informative = entry;
  informative.configuration = "renamed";
  informative.compile_seconds = 1;
  informative.tool = "neuron-cache 9";
  informative.created_at = "2030-01-01T00:00:00Z";
  EXPECT_TRUE(trust::verify_entry(informative, trusted).trusted());
  // Nor is the order of the lists: the statement sorts them.
  ai::Entry reordered = entry;
  std::reverse(reordered.modules[0].files.begin(), reordered.modules[0].files.end());
  EXPECT_TRUE(trust::verify_entry(reordered, trusted).trusted());
}

TEST(Signing, ForgedAndMalformedSignaturesOfATrustedKeyAreBad) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  trust::SecretKey forger = trust::generate_key("acme-ci-1");  // same name, other key
  trust::TrustedKeys trusted = trusting({key.public_key()});
  ai::Entry forged = signed_by(sample_entry(), forger);
  EXPECT_EQ(trust::verify_entry(forged, trusted).outcome(), Verdict::Outcome::BadSignature);
  ai::Entry malformed = sample_entry();
  for (const std::string& sig :
       {std::string(88, 'A'), std::string(86, 'A') + "==", std::string(88, '='),
        std::string(87, 'A') + "B", std::string("!") + std::string(87, 'A'), std::string("")}) {
    malformed.signatures = {{"acme-ci-1", sig}};
    EXPECT_EQ(trust::verify_entry(malformed, trusted).outcome(), Verdict::Outcome::BadSignature)
        << sig;
  }
}

TEST(Signing, TwoTrustedKeysDuringARotation) {
  trust::SecretKey old_key = trust::generate_key("acme-ci-1");
  trust::SecretKey new_key = trust::generate_key("acme-ci-2");
  trust::TrustedKeys both = trusting({old_key.public_key(), new_key.public_key()});
  ai::Entry by_old = signed_by(sample_entry(), old_key);
  ai::Entry by_new = signed_by(sample_entry(), new_key);
  ai::Entry by_both = signed_by(by_old, new_key);
  EXPECT_EQ(trust::verify_entry(by_old, both).valid, std::vector<std::string>{"acme-ci-1"});
  EXPECT_EQ(trust::verify_entry(by_new, both).valid, std::vector<std::string>{"acme-ci-2"});
  EXPECT_EQ(trust::verify_entry(by_both, both).valid,
            (std::vector<std::string>{"acme-ci-1", "acme-ci-2"}));
  // The old key removed from the trusted keys: what only it signed is no longer trusted.
  trust::TrustedKeys only_new = trusting({new_key.public_key()});
  EXPECT_EQ(trust::verify_entry(by_old, only_new).outcome(), Verdict::Outcome::UnknownKeys);
  Verdict co_signed = trust::verify_entry(by_both, only_new);
  EXPECT_TRUE(co_signed.trusted());
  EXPECT_EQ(co_signed.unknown, std::vector<std::string>{"acme-ci-1"});
}

TEST(Signing, ABadTrustedSignatureOutweighsAValidOne) {
  trust::SecretKey one = trust::generate_key("acme-ci-1");
  trust::SecretKey two = trust::generate_key("acme-ci-2");
  ai::Entry entry = signed_by(sample_entry(), one);
  ai::Entry other = sample_entry();
  other.modules[0].files[0].size = 999;
  trust::add_signature(entry, trust::sign_entry(other, two));  // vouches for other bytes
  Verdict verdict = trust::verify_entry(entry, trusting({one.public_key(), two.public_key()}));
  EXPECT_EQ(verdict.outcome(), Verdict::Outcome::BadSignature);
  EXPECT_EQ(verdict.valid, std::vector<std::string>{"acme-ci-1"});
  EXPECT_EQ(verdict.bad, std::vector<std::string>{"acme-ci-2"});
  // Not trusting the key whose signature fails: that signature is not checked.
  EXPECT_TRUE(trust::verify_entry(entry, trusting({one.public_key()})).trusted());
}

TEST(Signing, AddSignatureReplacesTheSameKeyAndIsBounded) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  ai::Entry entry = sample_entry();
  trust::add_signature(entry, {"acme-ci-1", std::string(88, 'A')});
  trust::add_signature(entry, trust::sign_entry(entry, key));
  ASSERT_EQ(entry.signatures.size(), 1u);
  EXPECT_TRUE(trust::verify_entry(entry, trusting({key.public_key()})).trusted());
  for (size_t i = 2; i <= ai::kMaxSignatures; ++i) {
    trust::add_signature(entry, {"k-" + std::to_string(i), std::string(88, 'A')});
  }
  EXPECT_EQ(entry.signatures.size(), ai::kMaxSignatures);
  EXPECT_EQ(kind_of([&] {
              trust::add_signature(entry, {"k-99", std::string(88, 'A')});
            }),
            ErrorKind::Input);
  EXPECT_ANY_THROW(trust::add_signature(entry, {"no number", std::string(88, 'A')}));
}

// --- the entry's JSON ---

TEST(SignedEntryJson, UnsignedEntriesAreTheBytesTheyWere) {
  Json entry = vector()["entry"];
  entry.erase("signatures");
  std::string old_text = pyjson::dumps(entry, 2);  // as neuron-cache 0.2 wrote it
  ai::Entry parsed = ai::parse_entry(old_text, "old");
  EXPECT_TRUE(parsed.signatures.empty());
  EXPECT_EQ(ai::serialize_entry(parsed), old_text);
  EXPECT_EQ(old_text.find("signatures"), std::string::npos);
}

TEST(SignedEntryJson, SignaturesRoundTrip) {
  Json entry = vector()["entry"];
  std::string text = pyjson::dumps(entry, 2);
  ai::Entry parsed = ai::parse_entry(text, "signed");
  ASSERT_EQ(parsed.signatures.size(), 1u);
  EXPECT_EQ(parsed.signatures[0].key, "acme-ci-1");
  EXPECT_EQ(ai::serialize_entry(parsed), text);
  trust::SecretKey two = trust::generate_key("acme-ci-2");
  trust::add_signature(parsed, trust::sign_entry(parsed, two));
  ai::Entry again = ai::parse_entry(ai::serialize_entry(parsed), "co-signed");
  EXPECT_EQ(again.signatures, parsed.signatures);
  EXPECT_TRUE(trust::verify_entry(again, trusting({two.public_key()})).trusted());
}

TEST(SignedEntryJson, MalformedSignaturesMakeTheEntryUnreadable) {
  Json good = vector()["entry"];
  Json sig = good["signatures"][0];
  auto with = [&](Json signatures) {
    Json entry = good;
    entry["signatures"] = std::move(signatures);
    return pyjson::dumps(entry);
  };
  Json many = Json::array();
  for (int i = 0; i < 17; ++i)
    many.push_back({{"key", "k-" + std::to_string(i)}, {"sig", sig["sig"]}});
  std::vector<std::pair<std::string, std::string>> cases = {
      {"not a list", with(Json::object())},
      {"null", with(nullptr)},
      {"17 signatures", with(many)},
      {"an item not an object", with(Json::array({"acme-ci-1"}))},
      {"no key", with(Json::array({{{"sig", sig["sig"]}}}))},
      {"no sig", with(Json::array({{{"key", "acme-ci-1"}}}))},
      {"a bad name", with(Json::array({{{"key", "acme"}, {"sig", sig["sig"]}}}))},
      {"a name with a newline", with(Json::array({{{"key", "acme\n-1"}, {"sig", sig["sig"]}}}))},
      {"a short sig", with(Json::array({{{"key", "acme-ci-1"}, {"sig", "AAAA"}}}))},
      {"a huge sig",
       with(Json::array({{{"key", "acme-ci-1"}, {"sig", std::string(1 << 20, 'A')}}}))},
      {"a huge name",
       with(Json::array({{{"key", std::string(1 << 20, 'a') + "-1"}, {"sig", sig["sig"]}}}))},
      {"a sig of other characters",
       with(Json::array({{{"key", "acme-ci-1"}, {"sig", std::string(88, '*')}}}))},
      {"a sig not a string", with(Json::array({{{"key", "acme-ci-1"}, {"sig", 5}}}))},
      {"two of one key", with(Json::array({sig, sig}))},
  };
  for (const auto& [what, text] : cases) {
    std::string message = message_of([&] { ai::parse_entry(text, "shard.json"); });
    EXPECT_TRUE(message.starts_with("shard.json: not a valid artifact index")) << what;
    EXPECT_LT(message.size(), 500u) << what;
    // In an index file, only that entry is set aside.
    Json index = {{"format", 2},
                  {"model_id", "meta-llama/Llama-3.1-8B"},
                  {"entries", {{good["key"].get<std::string>(), pyjson::parse(text)}}}};
    ai::IndexFile file = ai::parse_index(pyjson::dumps(index), "shard.json");
    EXPECT_TRUE(file.entries.empty()) << what;
    EXPECT_EQ(file.unreadable.size(), 1u) << what;
  }
  EXPECT_NO_THROW(ai::parse_entry(with(Json::array()), "empty list"));
}

// --- merged() and signatures ---

TEST(SignedEntryJson, MergedKeepsOnlySignaturesOverItsExactFiles) {
  trust::SecretKey key = trust::generate_key("acme-ci-1");
  trust::TrustedKeys trusted = trusting({key.public_key()});
  ai::Entry hub = signed_by(sample_entry(), key);
  ai::Entry grown = sample_entry();
  grown.modules.push_back(
      {"MODULE_1+d7517139",
       {{"model.neff", 1, std::string(64, 'e')}, {"model.done", 0, std::string(64, 'b')}}});

  ai::Entry same = ai::merged(hub, sample_entry());  // nothing added: still vouched for
  EXPECT_EQ(same.signatures, hub.signatures);
  EXPECT_TRUE(trust::verify_entry(same, trusted).trusted());

  ai::Entry union_entry = ai::merged(hub, grown);  // grew: the signature is over fewer files
  EXPECT_TRUE(union_entry.signatures.empty());
  EXPECT_EQ(trust::verify_entry(union_entry, trusted).outcome(), Verdict::Outcome::Unsigned);

  ai::Entry signed_grown = signed_by(grown, key);
  ai::Entry covered = ai::merged(sample_entry(), signed_grown);  // the union is `more`'s files
  EXPECT_EQ(covered.signatures, signed_grown.signatures);
  EXPECT_TRUE(trust::verify_entry(covered, trusted).trusted());

  ai::Entry changed = sample_entry();  // same names, other bytes: `first`'s records win
  changed.modules[0].files[0].sha256 = std::string(64, '9');
  ai::Entry first_wins = ai::merged(hub, signed_by(changed, trust::generate_key("other-2")));
  EXPECT_EQ(first_wins.signatures, hub.signatures);
  EXPECT_TRUE(trust::verify_entry(first_wins, trusted).trusted());
}

// --- independent implementations ---

// The worked vector of docs/formats.md: made by tests/data/signing/make_vector.py with CPython's
// json and the openssl command line.
TEST(SigningVector, MatchesTheDocumentedVector) {
  Json v = vector();
  trust::SecretKey key = trust::parse_secret_key(v["secret_key_file"].get<std::string>(), "vector");
  EXPECT_EQ(trust::public_key_line(key.public_key()), v["public_key_line"].get<std::string>());
  // RFC 8032's first test key: its public key is d75a9801...
  EXPECT_EQ(v["public_key_line"].get<std::string>(),
            "acme-ci-1:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=");
  ai::Entry entry = ai::entry_from_json(v["entry"], "vector");
  std::string statement = trust::canonical_statement(entry);
  EXPECT_EQ(statement, v["statement"].get<std::string>());
  EXPECT_EQ(sha256_hex(statement), v["statement_sha256"].get<std::string>());
  trust::Signature signature = trust::sign_entry(entry, key);  // Ed25519 is deterministic
  EXPECT_EQ(signature.sig, v["signature"].get<std::string>());
  EXPECT_EQ(entry.signatures, std::vector<trust::Signature>{signature});
  trust::TrustedKeys trusted;
  trusted.add(trust::parse_public_key(v["public_key_line"].get<std::string>(), "vector"));
  EXPECT_TRUE(trust::verify_entry(entry, trusted).trusted());
  // The doc shows the same numbers.
  std::string doc =
      testing::read_file(fs::path(NEURON_CACHE_TESTS_DIR).parent_path() / "docs/formats.md");
  for (const char* field : {"public_key_line", "signature", "statement_sha256"}) {
    EXPECT_NE(doc.find(v[field].get<std::string>()), std::string::npos) << field;
  }
  std::string secret_line = v["secret_key_file"].get<std::string>();
  EXPECT_NE(doc.find(secret_line.substr(0, secret_line.size() - 1)), std::string::npos);
}

// Entries whose statements a sloppy implementation gets wrong: a profile, a traced export with
// sub-folders, names beyond ASCII (escapes; code point order, not UTF-16's), large sizes.
std::vector<ai::Entry> varied_entries() {
  std::vector<ai::Entry> entries = {sample_entry(), ai::entry_from_json(vector()["entry"], "v")};
  ai::Entry profile;
  profile.inputs = cache_key::profile_inputs("llama-train", "2.21.33363.0+82129205",
                                             {"--model-type=transformer", "--note=caf\xc3\xa9"});
  profile.key = cache_key::key_of(profile.inputs);
  profile.modules.push_back({"MODULE_9+d7517139",
                             {{"model.neff", 1ull << 39, std::string(64, '1')},
                              {"model.done", 0, std::string(64, '2')}}});
  profile.tool = "t";
  profile.created_at = "c";
  entries.push_back(profile);
  ai::Entry traced = sample_entry();
  traced.modules = {{"MODULE_0123456789abcdef0123",
                     {{"config.json", 10, std::string(64, '3')},
                      {"unet/model.neuron", 20, std::string(64, '4')},
                      {"unet/\xef\xbf\xbd.bin", 1, std::string(64, '5')},      // U+FFFD
                      {"unet/\xf0\x9f\x98\x80.bin", 2, std::string(64, '6')},  // U+1F600
                      {"text encoder/model.neuron", 30, std::string(64, '7')}}}};
  entries.push_back(traced);
  return entries;
}

TEST(SigningOracle, PythonRebuildsTheStatementByteForByte) {
  testing::TempDir dir;
  std::vector<ai::Entry> entries = varied_entries();
  Json list = Json::array();
  for (const auto& entry : entries) list.push_back(ai::entry_to_json(entry));
  testing::write_file(dir / "entries.json", pyjson::dumps(list));
  fs::create_directory(dir / "out");
  std::string output;
  std::string command =
      shell_quote(NEURON_CACHE_PYTHON) + " " +
      shell_quote(std::string(NEURON_CACHE_TESTS_DIR) + "/oracle/signing_statement.py") + " " +
      shell_quote((dir / "entries.json").string()) + " " + shell_quote((dir / "out").string());
  ASSERT_EQ(testing::run_command(command, &output), 0) << output;
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(testing::read_file(dir / "out" / std::to_string(i)),
              trust::canonical_statement(entries[i]))
        << "entry " << i;
  }
}

bool have_openssl() {
  return testing::run_command("command -v openssl >/dev/null") == 0;
}

// Ed25519 both ways with the openssl command line: a signature it makes over our statement
// verifies here, and ours verifies there.
TEST(SigningOracle, OpensslCommandLineAgrees) {
  if (!have_openssl()) GTEST_SKIP() << "the openssl command line is not installed";
  testing::TempDir dir;
  std::string output;
  auto run = [&](const std::string& args) {
    int code = testing::run_command(
        "cd " + shell_quote(dir.path().string()) + " && openssl " + args, &output);
    EXPECT_EQ(code, 0) << args << ": " << output;
  };
  run("genpkey -algorithm ed25519 -out key.pem");
  run("pkey -in key.pem -pubout -outform DER -out pub.der");
  std::string der = testing::read_file(dir / "pub.der");
  ASSERT_EQ(der.size(), 44u);
  trust::PublicKey theirs{"openssl-1", {}};
  std::copy(der.end() - 32, der.end(), theirs.bytes.begin());

  ai::Entry entry = varied_entries()[3];
  testing::write_file(dir / "statement", trust::canonical_statement(entry));
  run("pkeyutl -sign -rawin -inkey key.pem -in statement -out sig.bin");
  std::string sig = testing::read_file(dir / "sig.bin");
  ASSERT_EQ(sig.size(), 64u);
  entry.signatures = {{"openssl-1", trust::base64_encode(
                                        reinterpret_cast<const uint8_t*>(sig.data()), sig.size())}};
  EXPECT_TRUE(trust::verify_entry(entry, trusting({theirs})).trusted());
  entry.modules[0].files[1].size += 1;
  EXPECT_EQ(trust::verify_entry(entry, trusting({theirs})).outcome(),
            Verdict::Outcome::BadSignature);

  // Ours, checked by openssl: the public key as DER (RFC 8410 prefix) and the raw signature.
  trust::SecretKey ours = trust::generate_key("acme-ci-1");
  ai::Entry mine = sample_entry();
  trust::Signature signature = trust::sign_entry(mine, ours);
  std::string prefix = "\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21";
  prefix.push_back('\0');
  trust::KeyBytes pub = ours.public_key().bytes;
  testing::write_file(dir / "ours.der", prefix + std::string(pub.begin(), pub.end()));
  testing::write_file(dir / "ours.sig", *trust::base64_decode(signature.sig));
  testing::write_file(dir / "mine", trust::canonical_statement(mine));
  run("pkey -pubin -inform DER -in ours.der -out ours.pem");
  run("pkeyutl -verify -rawin -pubin -inkey ours.pem -in mine -sigfile ours.sig");
  EXPECT_NE(output.find("Signature Verified Successfully"), std::string::npos) << output;
}

}  // namespace
}  // namespace neuron_cache
