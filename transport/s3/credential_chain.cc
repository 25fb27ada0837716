#include "transport/s3/credential_chain.h"

#include <ini.h>  // Debian's libinih: the AWS files are INI
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <string_view>
#include <vector>

namespace epochfs::transport::s3 {

using cache::Result;
using cache::Status;

namespace {

using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

int onIniValue(void* user, const char* section, const char* name, const char* value) {
  (*static_cast<IniFile*>(user))[section][name] = value;
  return 1;
}

// nullopt: the file does not exist. An unreadable or malformed file is an
// error (its line number, never its content).
Result<std::optional<IniFile>> readIni(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    if (errno == ENOENT) return std::optional<IniFile>();
    return Status::fromErrno(errno, "cannot read " + path);
  }
  IniFile ini;
  const int line = ini_parse_file(f, onIniValue, &ini);
  std::fclose(f);
  if (line != 0) {
    return Status::invalidArgument(path + ": not an AWS credentials/config file (line " +
                                   std::to_string(line) + ")");
  }
  return std::optional<IniFile>(std::move(ini));
}

std::string homeFile(const EnvLookup& env, const char* overrideVar, const char* leaf) {
  if (const char* p = env(overrideVar); p != nullptr && *p != '\0') return p;
  const char* home = env("HOME");
  std::string dir = home != nullptr && *home != '\0' ? home : "";
  if (dir.empty()) {
    if (const passwd* pw = getpwuid(getuid())) dir = pw->pw_dir;
  }
  return dir + "/.aws/" + leaf;
}

const char* kUnsupported =
    "; epochfs reads static keys only: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile "
    "with aws_access_key_id/aws_secret_access_key, or --s3-credentials-file";

// A profile's keys, or the refusal of a source we do not run.
Result<std::optional<Credentials>> keysOf(const Section& s, const std::string& where) {
  for (const char* key : {"credential_process", "web_identity_token_file", "role_arn",
                          "sso_start_url", "sso_session", "credential_source"}) {
    if (s.count(key) > 0 && s.count("aws_access_key_id") == 0) {
      return Status::invalidArgument(where + " uses " + key + ", which is not supported" +
                                     kUnsupported);
    }
  }
  auto id = s.find("aws_access_key_id");
  auto secret = s.find("aws_secret_access_key");
  if (id == s.end() && secret == s.end()) return std::optional<Credentials>();
  if (id == s.end() || secret == s.end() || id->second.empty() || secret->second.empty()) {
    return Status::invalidArgument(where +
                                   " needs both aws_access_key_id and aws_secret_access_key");
  }
  auto token = s.find("aws_session_token");
  return std::optional<Credentials>(
      Credentials(id->second, secret->second, token == s.end() ? "" : token->second));
}

Result<ResolvedCredentials> fromFile(const std::string& path, const std::string& profile,
                                     bool explicitFile) {
  if (explicitFile) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return Status::fromErrno(errno, "--s3-credentials-file");
    if ((st.st_mode & 077) != 0) {
      return Status::permissionDenied("--s3-credentials-file " + path +
                                      " is readable by group or others (chmod 600 it)");
    }
  }
  auto ini = readIni(path);
  if (!ini.isOk()) return ini.status();
  if (!ini->has_value()) return ResolvedCredentials{};
  auto section = (*ini)->find(profile);
  if (section == (*ini)->end()) {
    if (explicitFile) return Status::notFound(path + " has no profile [" + profile + "]");
    return ResolvedCredentials{};
  }
  const std::string where = path + " profile [" + profile + "]";
  auto keys = keysOf(section->second, where);
  if (!keys.isOk()) return keys.status();
  if (!keys->has_value()) {
    if (explicitFile) return Status::invalidArgument(where + " has no aws_access_key_id");
    return ResolvedCredentials{};
  }
  using Kind = CredentialsFile::Kind;
  return ResolvedCredentials{std::move(*keys),
                             "file " + where,
                             {explicitFile ? Kind::kExplicit : Kind::kShared, path, profile}};
}

// The config file's [profile P] (or [default]) with static keys; no
// credentials when the file, the section or the keys are absent.
Result<ResolvedCredentials> fromConfigFile(const std::string& config, const std::string& profile) {
  auto ini = readIni(config);
  if (!ini.isOk()) return ini.status();
  if (!ini->has_value()) return ResolvedCredentials{};
  const std::string name = profile == "default" ? "default" : "profile " + profile;
  auto section = (*ini)->find(name);
  if (section == (*ini)->end()) return ResolvedCredentials{};
  auto keys = keysOf(section->second, config + " [" + name + "]");
  if (!keys.isOk()) return keys.status();
  if (!keys->has_value()) return ResolvedCredentials{};
  return ResolvedCredentials{std::move(*keys),
                             "file " + config + " [" + name + "]",
                             {CredentialsFile::Kind::kConfig, config, profile}};
}

}  // namespace

Result<ResolvedCredentials> resolveCredentials(const CredentialRequest& request,
                                               const EnvLookup& envIn) {
  const EnvLookup env = envIn ? envIn : EnvLookup([](const char* n) { return std::getenv(n); });
  if (request.noSign) return ResolvedCredentials{std::nullopt, "none (--s3-no-sign-request)", {}};
  std::string profile = request.profile;
  if (profile.empty()) {
    const char* p = env("AWS_PROFILE");
    profile = p != nullptr && *p != '\0' ? p : "default";
  }
  if (!request.credentialsFile.empty()) return fromFile(request.credentialsFile, profile, true);

  const char* id = env("AWS_ACCESS_KEY_ID");
  const char* secret = env("AWS_SECRET_ACCESS_KEY");
  const bool hasId = id != nullptr && *id != '\0', hasSecret = secret != nullptr && *secret != '\0';
  if (hasId && hasSecret) {
    const char* token = env("AWS_SESSION_TOKEN");
    return ResolvedCredentials{
        Credentials(id, secret, token != nullptr ? token : ""), "environment", {}};
  }
  if (hasId != hasSecret) {
    return Status::invalidArgument(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
  }
  if (const char* w = env("AWS_WEB_IDENTITY_TOKEN_FILE"); w != nullptr && *w != '\0') {
    return Status::invalidArgument(
        std::string("AWS_WEB_IDENTITY_TOKEN_FILE is set: web identity is not supported") +
        kUnsupported);
  }
  auto shared =
      fromFile(homeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials"), profile, false);
  if (!shared.isOk() || shared->credentials) return shared;

  const std::string config = homeFile(env, "AWS_CONFIG_FILE", "config");
  auto fromConfig = fromConfigFile(config, profile);
  if (!fromConfig.isOk() || fromConfig->credentials) return fromConfig;
  return Status::permissionDenied(
      "no S3 credentials found (looked at AWS_ACCESS_KEY_ID, " +
      homeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials") + " and " + config +
      ", profile " + profile +
      "); instance metadata (IMDS/ECS) is not supported: give keys, --s3-credentials-file, "
      "or --s3-no-sign-request for a public bucket");
}

std::string CredentialsFile::describe() const {
  return path + (kind == Kind::kConfig && profile == "default" ? " [default]"
                                                               : " [profile " + profile + "]");
}

Result<Credentials> rereadCredentials(const CredentialsFile& file) {
  Result<ResolvedCredentials> r = Status::invalidArgument("credentials from no file");
  switch (file.kind) {
    case CredentialsFile::Kind::kNone:
      break;
    case CredentialsFile::Kind::kExplicit:
    case CredentialsFile::Kind::kShared:
      r = fromFile(file.path, file.profile, file.kind == CredentialsFile::Kind::kExplicit);
      break;
    case CredentialsFile::Kind::kConfig:
      r = fromConfigFile(file.path, file.profile);
      break;
  }
  if (!r.isOk()) return r.status();
  if (!r->credentials) return Status::notFound(file.describe() + " holds no keys any more");
  return std::move(*r->credentials);
}

namespace {

constexpr std::string_view kKindNames[] = {"", "explicit", "shared", "config"};

}  // namespace

std::string encodeCredentials(const ResolvedCredentials& r) {
  // NUL-terminated fields: the origin, the file's kind, path and profile,
  // then key id, secret and token when signed. No AWS key, secret, token or
  // path holds a NUL.
  std::string out = r.origin + '\0';
  out += kKindNames[static_cast<size_t>(r.file.kind)];
  out += '\0';
  out += r.file.path + '\0' + r.file.profile + '\0';
  if (const auto& c = r.credentials) {
    for (const std::string* f : {&c->accessKeyId, &c->secretAccessKey, &c->sessionToken}) {
      out += *f;
      out += '\0';
    }
  }
  return out;
}

Result<ResolvedCredentials> decodeCredentials(const std::string& bytes) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t end = bytes.find('\0', pos);
    if (end == std::string::npos) break;
    fields.emplace_back(bytes, pos, end - pos);
    pos = end + 1;
  }
  const Status bad = Status::invalidArgument("malformed credentials hand-off");
  auto wipe = [&fields] {
    for (std::string& f : fields) std::fill(f.begin(), f.end(), '\0');
  };
  if (pos != bytes.size() || (fields.size() != 4 && fields.size() != 7)) {
    wipe();
    return bad;
  }
  ResolvedCredentials r;
  r.origin = fields[0];
  const auto kind = std::find(std::begin(kKindNames), std::end(kKindNames), fields[1]);
  if (kind == std::end(kKindNames) || (kind == std::begin(kKindNames)) != fields[2].empty()) {
    wipe();
    return bad;
  }
  r.file = {static_cast<CredentialsFile::Kind>(kind - std::begin(kKindNames)), fields[2],
            fields[3]};
  if (fields.size() == 7) {
    if (fields[4].empty() || fields[5].empty()) {
      wipe();
      return bad;
    }
    r.credentials = Credentials(fields[4], fields[5], fields[6]);
  }
  wipe();
  return r;
}

}  // namespace epochfs::transport::s3
