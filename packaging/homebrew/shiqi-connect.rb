# Homebrew formula for shiqi-connect. scripts/dist writes dist/shiqi-connect.rb from this file
# with the release's URL (SHIQI_RELEASE_URL, else the dist/ folder as file://) and the SHA-256
# of each archive it built; `brew install ./dist/shiqi-connect.rb` installs from it.
class ShiqiConnect < Formula
  desc "Kafka and MySQL over SSH with certificates from the server's own CA"
  homepage "@HOMEPAGE@"
  version "@VERSION@"
  license "Apache-2.0"

  on_macos do
    on_arm do
      url "@URL@/shiqi-connect-@VERSION@-aarch64-apple-darwin.tar.gz"
      sha256 "@SHA256_aarch64-apple-darwin@"
    end
    on_intel do
      url "@URL@/shiqi-connect-@VERSION@-x86_64-apple-darwin.tar.gz"
      sha256 "@SHA256_x86_64-apple-darwin@"
    end
  end

  on_linux do
    on_arm do
      url "@URL@/shiqi-connect-@VERSION@-aarch64-unknown-linux-musl.tar.gz"
      sha256 "@SHA256_aarch64-unknown-linux-musl@"
    end
    on_intel do
      url "@URL@/shiqi-connect-@VERSION@-x86_64-unknown-linux-musl.tar.gz"
      sha256 "@SHA256_x86_64-unknown-linux-musl@"
    end
  end

  def install
    bin.install "shiqi-connect"
    generate_completions_from_executable(bin/"shiqi-connect", "completions")
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/shiqi-connect --version")
  end
end
