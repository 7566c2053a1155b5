# Faultline's Homebrew formula, written as homebrew-core would take it (the pattern of swiftlint, swift-format and
# xcbeautify: SwiftPM from a tag tarball, the Swift runtime linked in on Linux).
# Two placeholders until the first release: the project's public home is not settled, so
# https://github.com/faultline-dev/faultline (homepage, url, head) stands in for it, and sha256 is zeros until that
# tag's tarball exists. scripts/brew-check.sh (make brew-check) writes .build/brew-check/faultline.rb, this file with
# a local `git archive` tarball's file:// url and real sha256, and runs its install and test on Linux without
# Homebrew; docs/PORTABILITY.md says what that proves and what only a Mac can.
class Faultline < Formula
  desc "Fault-injecting stub HTTP server for testing HTTP clients"
  homepage "https://github.com/faultline-dev/faultline"
  url "https://github.com/faultline-dev/faultline/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "Apache-2.0"
  head "https://github.com/faultline-dev/faultline.git", branch: "main"

  depends_on "pkgconf" => :build
  # Package.swift's swift-tools-version 6.0 needs Xcode 16; its platforms say macOS 15 (Mutex, Synchronization).
  depends_on xcode: ["16.0", :build]
  depends_on "libevent"
  depends_on macos: :sequoia
  depends_on "nghttp2"
  depends_on "openssl@3"

  uses_from_macos "swift" => :build

  def install
    args = %w[--disable-sandbox --configuration release --product faultline]
    args << "--static-swift-stdlib" if OS.linux?
    system "swift", "build", *args
    bin.install ".build/release/faultline"
    pkgshare.install "scenarios"
    generate_completions_from_executable(bin/"faultline", "completions")
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/faultline --version")
    assert_match "complete -o filenames", (bash_completion/"faultline").read
    assert_match(/^ok: \d+ scenario\(s\)/, shell_output("#{bin}/faultline validate #{pkgshare}/scenarios"))

    # A route that fails once with 503, then answers.
    (testpath/"scenarios/brew-test.json").write <<~JSON
      {
        "name": "brew-test",
        "routes": [
          {
            "id": "hello",
            "match": { "method": "GET", "path": "/hello" },
            "responses": [ { "status": 503, "text": "try again" }, { "text": "Hello from Faultline" } ]
          }
        ]
      }
    JSON
    assert_match "ok: 1 scenario(s), 1 route(s)", shell_output("#{bin}/faultline validate #{testpath}/scenarios")

    port_file = testpath/"port"
    pid = spawn bin/"faultline", "serve", testpath/"scenarios", "--port", "0", "--port-file", port_file, "--quiet"
    begin
      300.times do
        break if port_file.exist?

        sleep 0.1
      end
      assert_path_exists port_file
      url = "http://127.0.0.1:#{port_file.read.strip}/hello"
      assert_equal "try again 503", shell_output("curl -s -w ' %{http_code}' #{url}")
      assert_equal "Hello from Faultline", shell_output("curl -s #{url}")
    ensure
      Process.kill("TERM", pid)
      _, status = Process.wait2(pid)
    end
    assert_equal 0, status.exitstatus
  end
end
