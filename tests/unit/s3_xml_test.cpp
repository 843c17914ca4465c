// The bounded XML reader of S3 answers (storage/s3_xml.h) and s3:// URLs: hostile answers are
// errors, never partial answers.
#include <gtest/gtest.h>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_xml.h"

namespace neuron_cache::storage {
namespace {

TEST(S3Xml, ReadsAListPage) {
  std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>t/+=&amp;</NextContinuationToken>"
      "<Contents><Key>p/a&amp;b&#x2B;c&#233;.neff</Key><Size>12</Size>"
      "<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag>"
      "<LastModified>2026-11-29T18:00:00.000Z</LastModified></Contents>"
      "<Contents><Key>p/big</Key><Size>9223372036854775807</Size><ETag>\"x-3\"</ETag></Contents>"
      "<CommonPrefixes><Prefix>p/MODULE_1/</Prefix></CommonPrefixes></ListBucketResult>";
  s3xml::ListPage page = s3xml::parse_list_page(body);
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "p/a&b+c\xC3\xA9.neff");
  EXPECT_EQ(page.objects[0].size, 12u);
  EXPECT_EQ(page.objects[0].modified, 1'795'975'200);  // 2026-11-29T18:00:00Z
  EXPECT_EQ(page.objects[1].modified, 0);              // none listed: unknown
  EXPECT_EQ(page.objects[0].etag, "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(s3xml::is_plain_md5(page.objects[0].etag));
  EXPECT_FALSE(s3xml::is_plain_md5(page.objects[1].etag));
  EXPECT_EQ(page.common_prefixes, std::vector<std::string>{"p/MODULE_1/"});
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "t/+=&");
}

TEST(S3Xml, RefusesHostileAnswers) {
  auto contents = [](const std::string& inner) {
    return "<ListBucketResult>" + inner + "</ListBucketResult>";
  };
  std::string many;
  for (int i = 0; i < 1001; ++i) many += "<Contents><Key>k</Key><Size>1</Size></Contents>";
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  const std::vector<std::string> hostile = {
      contents("<Contents><Key>k</Key><Size>-1</Size></Contents>"),
      contents("<Contents><Key>k</Key><Size>99999999999999999999</Size></Contents>"),
      contents("<Contents><Key>k</Key><Size>1e3</Size></Contents>"),
      contents("<Contents><Size>1</Size></Contents>"),
      contents("<Contents><Key>" + std::string(5000, 'k') + "</Key><Size>1</Size></Contents>"),
      contents(many),
      contents("<IsTruncated>true</IsTruncated>"),
      contents("<Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"),
      contents("<Contents><Key>a&#0;</Key><Size>1</Size></Contents>"),
      "<!DOCTYPE x [<!ENTITY a \"b\">]>" + contents(""),
      deep,
      "<ListBucketResult><Contents></ListBucketResult>",
      "<ListBucketResult>",
      "<Other/>",
      "",
      std::string(s3xml::kMaxBodyBytes + 1, ' '),
  };
  for (const auto& body : hostile) {
    EXPECT_THROW(s3xml::parse_list_page(body), Error) << body.substr(0, 200);
  }
}

TEST(S3Xml, ReadsErrorsAndUploadIds) {
  auto error = s3xml::parse_error(
      "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Reduce</Message></Error>");
  EXPECT_EQ(error.code, "SlowDown");
  EXPECT_EQ(error.message, "Reduce");
  EXPECT_TRUE(s3xml::parse_error("not xml <").code.empty());
  // The store's words are escaped where they enter a message: no ESC, BEL or newline of theirs.
  auto hostile = s3xml::parse_error(
      "<Error><Code>Slow&#10;Down</Code><Message>x&#27;[31mred&#7;\nneuron-cache: "
      "pushed</Message></Error>");
  EXPECT_EQ(hostile.code, "Slow\\x0aDown");
  EXPECT_EQ(hostile.message, "x\\x1b[31mred\\x07\\x0aneuron-cache: pushed");
  EXPECT_EQ(s3xml::parse_upload_id("<InitiateMultipartUploadResult><Bucket>b</Bucket><UploadId>"
                                   "abc.def</UploadId></InitiateMultipartUploadResult>"),
            "abc.def");
  EXPECT_THROW(s3xml::parse_upload_id("<InitiateMultipartUploadResult/>"), Error);
}

TEST(S3Url, SplitsBucketAndPrefix) {
  auto where = parse_s3_url("s3://my-bucket/team/cache/");
  EXPECT_EQ(where.bucket, "my-bucket");
  EXPECT_EQ(where.prefix, "team/cache");
  EXPECT_EQ(parse_s3_url("s3://my-bucket").prefix, "");
  for (const char* bad : {"s3://", "s3://AB", "s3://b_c/x", "s3://bucket/../x", "s3://bucket/a//b",
                          "https://bucket/x"}) {
    EXPECT_THROW(parse_s3_url(bad), Error) << bad;
  }
}

TEST(S3Xml, UploadsPagesAndTheirDates) {
  auto page = s3xml::parse_uploads_page(
      "<ListMultipartUploadsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<IsTruncated>true</IsTruncated><NextKeyMarker>c/b</NextKeyMarker>"
      "<NextUploadIdMarker>u2</NextUploadIdMarker>"
      "<Upload><Key>c/a</Key><UploadId>u1</UploadId><Initiated>2024-02-29T23:59:59.000Z"
      "</Initiated></Upload><Upload><Key>c/b</Key><UploadId>u2</UploadId>"
      "<Initiated>not a date</Initiated></Upload></ListMultipartUploadsResult>");
  ASSERT_EQ(page.uploads.size(), 2u);
  EXPECT_EQ(page.uploads[0].initiated, 1709251199);
  EXPECT_EQ(page.uploads[1].initiated, std::nullopt);  // never aborted: its age is unknown
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_upload_id_marker, "u2");
  EXPECT_THROW(s3xml::parse_uploads_page("<ListBucketResult/>"), Error);
  EXPECT_THROW(
      s3xml::parse_uploads_page("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                                "</ListMultipartUploadsResult>"),
      Error);
  EXPECT_EQ(s3xml::parse_timestamp("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(s3xml::parse_timestamp("2024-13-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(s3xml::parse_timestamp("2024-01-01"), std::nullopt);
}

}  // namespace
}  // namespace neuron_cache::storage

namespace neuron_cache {
namespace {

// x-amz-checksum-sha256 is the base64 of the digest's bytes (values from Python's hashlib and
// base64).
TEST(S3Checksum, Base64OfHexIsWhatPythonGives) {
  EXPECT_EQ(base64_of_hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
  EXPECT_EQ(base64_of_hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
  EXPECT_EQ(base64_of_hex("ff"), "/w==");
  EXPECT_EQ(base64_of_hex("FFEE"), "/+4=");
  EXPECT_EQ(base64_of_hex("abc"), "");
  EXPECT_EQ(base64_of_hex("zz"), "");
}

}  // namespace
}  // namespace neuron_cache
