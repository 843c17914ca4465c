// Pieces of the Hub client that need no server: URLs, retry decisions, error messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/hub/failures.h"
#include "neuron_cache/net/answer.h"
#include "neuron_cache/net/http.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/remote/lookup.h"

namespace neuron_cache::hub {
namespace {

net::HttpResponse answer(long status, std::vector<std::pair<std::string, std::string>> headers = {},
                         std::string body = {}) {
  net::HttpResponse response;
  response.status = status;
  response.headers.items = std::move(headers);
  response.body = std::move(body);
  return response;
}

TEST(HubUrls, OriginIgnoresPathAndDefaultPorts) {
  EXPECT_EQ(url::origin_of("https://HuggingFace.co/api/models/x"), "https://huggingface.co");
  EXPECT_EQ(url::origin_of("http://127.0.0.1:8080/a?b"), "http://127.0.0.1:8080");
  EXPECT_EQ(url::origin_of("http://127.0.0.1:80/a"), "http://127.0.0.1");
  EXPECT_EQ(url::origin_of("https://h:443"), "https://h");
  EXPECT_NE(url::origin_of("http://127.0.0.1:8080/"), url::origin_of("http://127.0.0.1:8081/"));
  EXPECT_EQ(url::origin_of("/relative/path"), "");
}

TEST(HubUrls, RedirectLocationsResolveAgainstTheRequest) {
  const std::string base = "http://127.0.0.1:9000/org/repo/resolve/main/a/b.json?x=1";
  EXPECT_EQ(url::resolve_location(base, "http://cdn:1/x"), "http://cdn:1/x");
  EXPECT_EQ(url::resolve_location(base, "/api/resolve-cache/y"),
            "http://127.0.0.1:9000/api/resolve-cache/y");
  EXPECT_EQ(url::resolve_location(base, "c.json"),
            "http://127.0.0.1:9000/org/repo/resolve/main/a/c.json");
  EXPECT_EQ(url::resolve_location(base, "//other:2/z"), "http://other:2/z");
}

TEST(HubUrls, EncodingKeepsUnreservedCharacters) {
  EXPECT_EQ(url::url_encode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(url::url_encode("neuronxcc-2.21+abc/MODULE_1+d7/model.neff", true),
            "neuronxcc-2.21%2Babc/MODULE_1%2Bd7/model.neff");
  EXPECT_EQ(url::url_encode("a b~_.-", false), "a%20b~_.-");
}

TEST(HubRetries, TransientFailuresAreRetriedOthersAreNot) {
  net::RetryPolicy policy{6, std::chrono::milliseconds(100), std::chrono::milliseconds(1000)};
  for (long status : {0L, 408L, 429L, 500L, 502L, 503L, 504L}) {
    EXPECT_TRUE(net::retry_delay(answer(status), 1, policy).has_value()) << status;
  }
  for (long status : {400L, 401L, 403L, 404L, 409L, 412L, 416L}) {
    EXPECT_FALSE(net::retry_delay(answer(status), 1, policy).has_value()) << status;
  }
  EXPECT_FALSE(net::retry_delay(answer(503), 6, policy).has_value()) << "attempts are bounded";
}

TEST(HubRetries, ServerDelaysWinOverBackoff) {
  net::RetryPolicy policy{6, std::chrono::milliseconds(100), std::chrono::milliseconds(1000)};
  EXPECT_EQ(*net::retry_delay(answer(429, {{"Retry-After", "7"}}), 1, policy),
            std::chrono::seconds(7));
  EXPECT_EQ(*net::retry_delay(answer(429, {{"RateLimit", "\"api\";r=0;t=12"}}), 1, policy),
            std::chrono::seconds(13));
  // Not exhausted (r>0): the RateLimit header is not the reason, so the backoff applies.
  auto delay = *net::retry_delay(answer(429, {{"RateLimit", "\"api\";r=5;t=12"}}), 1, policy);
  EXPECT_GE(delay, std::chrono::milliseconds(50));
  EXPECT_LE(delay, std::chrono::milliseconds(150));
}

TEST(HubRetries, AServersWaitIsBoundedToTenMinutes) {
  net::RetryPolicy policy{6, std::chrono::milliseconds(100), std::chrono::milliseconds(1000)};
  EXPECT_EQ(*net::retry_delay(answer(429, {{"Retry-After", "86400"}}), 1, policy),
            net::kMaxServerWait);
  EXPECT_EQ(*net::retry_delay(answer(429, {{"RateLimit", "\"api\";r=0;t=99999999999999999999"}}), 1,
                              policy),
            net::kMaxServerWait);
}

// The Hub's `RateLimit: "api";r=<left>;t=<seconds to the reset>` (hub-http-api.md §7.2).
TEST(HubQuotas, RateLimitHeadersAreReadOrIgnoredWhole) {
  auto limit = net::rate_limit(answer(200, {{"RateLimit", "\"api\";r=497;t=212"}}));
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->bucket, "api");
  EXPECT_EQ(limit->remaining, 497);
  EXPECT_EQ(limit->reset_seconds, 212);
  limit = net::rate_limit(answer(200, {{"RateLimit", " \"resolvers\" ; r=0 ; t=3 "}}));
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->bucket, "resolvers");
  EXPECT_EQ(limit->remaining, 0);
  EXPECT_EQ(limit->reset_seconds, 3);
  for (const char* bad : {"", "\"api\"", "\"api\";r=1", "\"api\";t=1", "r=0;t=1",
                          "\"api\";r=-1;t=1", "\"api\";r=0;t=soon", "\"api\";r=0x1;t=1"}) {
    EXPECT_FALSE(net::rate_limit(answer(200, {{"RateLimit", bad}}))) << bad;
  }
  EXPECT_FALSE(net::rate_limit(answer(200)));
  // A hostile reset is saturated, not thrown on: quota_pause bounds it.
  limit = net::rate_limit(answer(200, {{"RateLimit", "\"api\";r=0;t=123456789012345678901"}}));
  ASSERT_TRUE(limit);
  EXPECT_GT(limit->reset_seconds, 600);
}

TEST(HubQuotas, RequestsCountInTheHubsBuckets) {
  auto request = [](std::string method, std::string url) {
    net::HttpRequest r;
    r.method = std::move(method);
    r.url = std::move(url);
    return r;
  };
  const std::string hub = "https://huggingface.co";
  EXPECT_EQ(net::quota_buckets(request("GET", hub + "/org/repo/resolve/main/a.json")),
            std::vector<std::string>{"resolvers"});
  EXPECT_EQ(net::quota_buckets(request("GET", hub + "/api/resolve-cache/models/org/repo/c/a")),
            std::vector<std::string>{"resolvers"});
  EXPECT_EQ(net::quota_buckets(request("GET", hub + "/api/models/org/repo/tree/main?x=/commit/")),
            std::vector<std::string>{"api"});
  EXPECT_EQ(net::quota_buckets(request("POST", hub + "/api/models/org/repo/commit/main")),
            (std::vector<std::string>{"api", "commit"}));
  EXPECT_EQ(net::quota_buckets(request("GET", hub + "/api/models/org/repo/commit/abc")),
            std::vector<std::string>{"api"})
      << "reading a commit is no commit";
}

// What pauses a bucket: RateLimit r=0 on any answer (the next request would be refused), or a
// 429 with Retry-After for the request's own bucket (the commit quota's answer). Nothing else.
TEST(HubQuotas, AUsedUpQuotaPausesItsBucketUntilTheReset) {
  net::HttpRequest get{"GET", "https://huggingface.co/api/models/org/repo"};
  net::HttpRequest commit{"POST", "https://huggingface.co/api/models/org/repo/commit/main"};
  auto pause = net::quota_pause(get, answer(200, {{"RateLimit", "\"api\";r=0;t=41"}}));
  ASSERT_TRUE(pause);
  EXPECT_EQ(pause->bucket, "api");
  EXPECT_EQ(pause->wait, std::chrono::seconds(42)) << "t + 1, as huggingface_hub waits";
  EXPECT_FALSE(net::quota_pause(get, answer(200, {{"RateLimit", "\"api\";r=1;t=41"}})));

  pause = net::quota_pause(
      commit, answer(429, {{"Retry-After", "1800"}, {"RateLimit", "\"api\";r=800;t=100"}}));
  ASSERT_TRUE(pause);
  EXPECT_EQ(pause->bucket, "commit");
  EXPECT_EQ(pause->wait, std::chrono::seconds(600)) << "bounded to kMaxServerWait";
  pause = net::quota_pause(get, answer(429, {{"Retry-After", "7"}}));
  ASSERT_TRUE(pause);
  EXPECT_EQ(pause->bucket, "api");
  EXPECT_EQ(pause->wait, std::chrono::seconds(7));

  EXPECT_FALSE(net::quota_pause(get, answer(429))) << "how long is not said";
  EXPECT_FALSE(
      net::quota_pause(get, answer(429, {{"Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT"}})));
  EXPECT_FALSE(net::quota_pause(get, answer(503, {{"Retry-After", "7"}})));
}

TEST(HubRetries, BackoffDoublesWithJitterAndIsCapped) {
  net::RetryPolicy policy{6, std::chrono::milliseconds(1000), std::chrono::milliseconds(30000)};
  for (int attempt = 1; attempt <= 8; ++attempt) {
    auto wait = net::backoff(attempt, policy).count();
    double nominal = std::min(30000.0, 1000.0 * (1 << (attempt - 1)));
    EXPECT_GE(wait, static_cast<long>(nominal * 0.5) - 1) << attempt;
    EXPECT_LE(wait, 30000) << attempt;
  }
}

TEST(HubErrors, MessagesSayWhatFailedWhyAndWhatToDo) {
  std::string missing = hub_error(answer(404, {{"X-Error-Code", "RepoNotFound"},
                                               {"X-Error-Message", "Repository not found"}}),
                                  "listing files of org/cache", "org/cache")
                            .what();
  EXPECT_NE(missing.find("listing files of org/cache failed"), std::string::npos) << missing;
  EXPECT_NE(missing.find("RepoNotFound"), std::string::npos);
  EXPECT_NE(missing.find("neuron-cache whoami"), std::string::npos);
  std::string read_only = hub_error(answer(403, {}, "{\"error\": \"read-only token\"}"),
                                    "committing to org/cache", "org/cache")
                              .what();
  EXPECT_NE(read_only.find("read-only token"), std::string::npos) << read_only;
  EXPECT_NE(read_only.find("lacks write access to org/cache"), std::string::npos);
  net::HttpResponse dropped = answer(0);
  dropped.error = "Couldn't connect to server";
  std::string offline = hub_error(dropped, "reading repo x", "x").what();
  EXPECT_NE(offline.find("Couldn't connect"), std::string::npos);
  EXPECT_NE(offline.find("HF_ENDPOINT"), std::string::npos);
  // LFS storage (no repo named) never gets the Hub's repo wording (issue 21).
  std::string gone = hub_error(answer(404), "completing the upload of model.neff", "").what();
  EXPECT_EQ(gone.find("repo "), std::string::npos) << gone;
  EXPECT_NE(gone.find("LFS storage"), std::string::npos) << gone;
}

// Issue 22: the advice names the cause the tool knows (no token sent, a refused token, a
// missing repo with the token's namespaces) in its reader's words (hub::Audience).
TEST(HubErrors, AdviceNamesTheKnownCauseInTheReadersWords) {
  auto text = [](long status, const std::string& code, AdviceContext context) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!code.empty()) headers.emplace_back("X-Error-Code", code);
    return std::string(
        hub_error(answer(status, headers), "reading repo org/cache", "org/cache", context).what());
  };
  std::string anonymous = text(401, "RepoNotFound", {false, Audience::CommandLine, {}});
  EXPECT_NE(anonymous.find("no Hugging Face token"), std::string::npos) << anonymous;
  EXPECT_EQ(anonymous.find("does not exist"), std::string::npos) << anonymous;
  std::string refused = text(401, "", {true, Audience::CommandLine, {}});
  EXPECT_NE(refused.find("refused the token (invalid, expired or revoked)"), std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("does not exist"), std::string::npos) << refused;
  std::string ours = text(404, "RepoNotFound", {true, Audience::CommandLine, {{"alice", "org"}}});
  EXPECT_NE(ours.find("`neuron-cache create -n org/cache`"), std::string::npos) << ours;
  EXPECT_EQ(ours.find("namespaces ("), std::string::npos) << ours;
  std::string foreign = text(404, "RepoNotFound", {true, Audience::CommandLine, {{"alice"}}});
  EXPECT_NE(foreign.find("\"org\" is not one of the token's namespaces (alice)"), std::string::npos)
      << foreign;
  for (long status : {401L, 403L, 404L}) {
    for (bool token : {false, true}) {
      std::string action = text(status, "", {token, Audience::Action, {}});
      EXPECT_EQ(action.find("neuron-cache "), std::string::npos) << action;
      EXPECT_NE(action.find("`token` input"), std::string::npos) << status << action;
    }
  }
}

// Each front end is told how to give the tool a token in its own terms: the CLI never hears of
// the Action's inputs, Bazel is told about --repo_env, the Action about its `token` input.
TEST(HubErrors, TokenAdviceIsWordedForTheFrontEndThatRuns) {
  auto text = [](long status, bool token, Audience audience) {
    return std::string(
        hub_error(answer(status, {}), "reading repo org/cache", "org/cache", {token, audience, {}})
            .what());
  };
  struct Expected {
    Audience audience;
    std::string says;
    std::vector<std::string> never;
  };
  const std::vector<Expected> cases = {
      {Audience::CommandLine, "set HF_TOKEN", {"action", "Action", "Bazel", "CMake"}},
      {Audience::CMake, "the CMake configure", {"action", "Action", "Bazel", "neuron-cache "}},
      {Audience::Bazel, "--repo_env=HF_TOKEN_PATH", {"action", "Action", "CMake", "set HF_TOKEN"}},
      {Audience::Action, "the action's `token` input", {"Bazel", "CMake", "set HF_TOKEN"}},
  };
  for (const auto& expected : cases) {
    for (auto [status, token] : {std::pair{401L, false}, {401L, true}, {403L, true}}) {
      std::string said = text(status, token, expected.audience);
      EXPECT_NE(said.find(expected.says), std::string::npos) << status << " " << said;
      for (const auto& word : expected.never)
        EXPECT_EQ(said.find(word), std::string::npos) << status << " " << word << ": " << said;
    }
  }
  EXPECT_EQ(audience_named("cmake"), Audience::CMake);
  EXPECT_EQ(audience_named("bazel"), Audience::Bazel);
  EXPECT_EQ(audience_named(""), Audience::CommandLine);
  EXPECT_EQ(audience_named("anything"), Audience::CommandLine);
}

// A Hub error body is the server's text: its newlines must not forge lines of ours, nor its ESC
// and BEL reach the terminal, whether it comes in the body, X-Error-Message or X-Error-Code.
TEST(HubErrors, TheServersWordsAreEscaped) {
  const std::string forged = "nope\nneuron-cache: Synchronization complete\x1b[2J\a";
  std::vector<net::HttpResponse> answers = {
      answer(500, {}, nlohmann::json({{"error", forged}}).dump()),
      answer(500, {{"X-Error-Message", forged}}),
      answer(500, {{"X-Error-Code", forged}}),
  };
  for (const auto& response : answers) {
    std::string message = hub_error(response, "listing files of org/cache", "org/cache").what();
    EXPECT_EQ(message.find_first_of("\n\x1b\a"), std::string::npos) << message;
    EXPECT_NE(message.find("nope\\x0aneuron-cache: Synchronization complete\\x1b[2J\\x07"),
              std::string::npos)
        << message;
  }
  std::string long_message =
      server_message(answer(500, {{"X-Error-Message", std::string(5000, 'a')}}));
  EXPECT_LT(long_message.size(), 500u) << "a whole page is not quoted";
}

// 8-bit terminal commands (C1: U+009B is CSI), marks that reorder text on screen (U+202E) and
// bytes that are not UTF-8 never reach a terminal as they are; other UTF-8 text stays readable.
TEST(HubErrors, PrintableEscapesC1BidiAndBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80");
  EXPECT_EQ(printable("a\xc2\x9b"
                      "2Jb"),
            "a\\xc2\\x9b2Jb");
  EXPECT_EQ(printable("x\xe2\x80\xaetxt.exe"), "x\\xe2\\x80\\xaetxt.exe");
  EXPECT_EQ(printable("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");
  EXPECT_EQ(printable("\x9b"
                      "31m"),
            "\\x9b31m");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // an overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(printable("\xe6\x97"), "\\xe6\\x97");           // cut in the middle
  EXPECT_EQ(printable(std::string(100, 'a'), 10), "aaaaaaaaaa... (100 bytes)");
}

// What a reader says is wrong with an answer may quote it (a key): escaped too.
TEST(HubErrors, AWrongAnswerIsQuotedEscaped) {
  net::HttpResponse response = answer(200, {}, R"({"part\nneuron-cache: pushed\u001b[2J": 1})");
  auto read = [](const nlohmann::json& body) -> int {
    for (const auto& item : body.items()) throw net::BadAnswer("\"" + item.key() + "\" is odd");
    return 0;
  };
  try {
    net::read_answer(response, "GET /x", "a list of parts", read);
    ADD_FAILURE() << "the answer was taken";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_EQ(message.find_first_of("\n\x1b"), std::string::npos) << message;
    EXPECT_NE(message.find("part\\x0aneuron-cache: pushed\\x1b[2J"), std::string::npos) << message;
  }
}

// One rule for counts in messages: no "1 configurations", no "1 hits".
TEST(Wording, CountsAgreeWithTheirNoun) {
  EXPECT_EQ(count_of(1, "configuration"), "1 configuration");
  EXPECT_EQ(count_of(0, "configuration"), "0 configurations");
  EXPECT_EQ(count_of(2, "hit"), "2 hits");
  EXPECT_EQ(count_of(1, "miss", "misses"), "1 miss");
  EXPECT_EQ(count_of(3, "miss", "misses"), "3 misses");
}

TEST(HubHeaders, LookupIsCaseInsensitive) {
  net::Headers headers;
  headers.items = {{"x-linked-etag", "\"abc\""}, {"Content-Length", "3"}};
  EXPECT_EQ(headers.get("X-Linked-Etag"), "\"abc\"");
  EXPECT_EQ(headers.get("content-length"), "3");
  EXPECT_EQ(headers.get("ETag"), std::nullopt);
}

TEST(LookupDtypes, ShortAndLongNamesAreTheSame) {
  EXPECT_EQ(remote::canonical_dtype("bf16"), "bfloat16");
  EXPECT_EQ(remote::canonical_dtype("fp16"), "float16");
  EXPECT_EQ(remote::canonical_dtype("bfloat16"), "bfloat16");
  EXPECT_EQ(remote::canonical_dtype("int8"), "int8");
}

}  // namespace
}  // namespace neuron_cache::hub
