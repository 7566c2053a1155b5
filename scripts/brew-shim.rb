# frozen_string_literal: true

# Runs a Homebrew formula's own `install` and `test` methods without Homebrew, for scripts/brew-check.sh: just enough
# of Homebrew's Formula DSL, its Pathname extensions and its test assertions, each kept to the semantics of
# Homebrew's own (Library/Homebrew/formula.rb, extend/pathname.rb, formula_assertions.rb), so that the formula's
# Ruby runs as written rather than a copy of its commands. Whatever the shim does not define fails loudly
# (NoMethodError, NameError): a formula that grows a call the shim lacks stops the check instead of skipping a step.
#
#   ruby scripts/brew-shim.rb info FORMULA             the stanzas and dependencies, as NAME=VALUE lines
#   ruby scripts/brew-shim.rb install FORMULA WORKDIR  `brew install --build-from-source`: checks the url's sha256
#                                                      (file:// only: this runs offline), unpacks it, runs
#                                                      `install` in it into WORKDIR/Cellar/NAME/VERSION, then
#                                                      checks the installed binaries' linkage
#   ruby scripts/brew-shim.rb test FORMULA WORKDIR     `brew test`: the `test` block in a fresh testpath
#
# Not emulated: superenv (Homebrew's compiler shims and its PATH, PKG_CONFIG_PATH and -L/-I flags from the declared
# dependencies only: here the build sees every Debian package), macOS's sandbox, downloads, bottles, and
# requirements such as `depends_on xcode:` and `depends_on macos:` (reported as macOS-only and skipped).
require "digest"
require "English"
require "fileutils"
require "pathname"
require "rbconfig"
require "tmpdir"
require "uri"
require "minitest"
require "minitest/assertions"

$stdout.sync = true

def ohai(title, *lines)
  puts "==> #{title}"
  puts lines unless lines.empty?
  $stdout.flush
end

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Homebrew extends Ruby's Pathname (extend/pathname.rb); these are the parts a formula's install and test use.
class Pathname
  # As Homebrew's: a Pathname goes wherever a String does (spawn, system, File.open, string interpolation).
  alias to_str to_s

  # Homebrew's Pathname#install: moves (not copies) each source into this folder, made first, under its base name;
  # `{ "from" => "to" }` renames on the way.
  def install(*sources)
    sources.each do |source|
      case source
      when Array then source.each { |s| install_p(s, File.basename(s)) }
      when Hash then source.each { |s, new_basename| install_p(s, new_basename) }
      else install_p(source, File.basename(source))
      end
    end
  end

  private

  def install_p(source, new_basename)
    source = Pathname(source)
    raise Errno::ENOENT, source.to_s if !source.symlink? && !source.exist?

    mkpath
    FileUtils.mv source, join(new_basename)
  end
end

# Homebrew's Pathname#write (extend/pathname/write_mkpath_extension.rb): never overwrites, makes the folder first.
module WriteMkpath
  def write(content, offset = nil, **options)
    raise "Will not overwrite #{self}" if exist? && offset.nil? && !options[:mode].to_s.match?(/^a\+?$/)

    dirname.mkpath
    offset.nil? ? super(content, **options) : super
  end
end
Pathname.prepend(WriteMkpath)

# OS.mac? and OS.linux?, from the Ruby that runs the shim.
module OS
  def self.mac?
    RbConfig::CONFIG["host_os"].include?("darwin")
  end

  def self.linux?
    RbConfig::CONFIG["host_os"].include?("linux")
  end
end

module Hardware
  # Hardware::CPU.arm? and .intel?, from the Ruby that runs the shim.
  module CPU
    def self.arm?
      RbConfig::CONFIG["host_cpu"].match?(/^(arm|aarch64)/)
    end

    def self.intel?
      RbConfig::CONFIG["host_cpu"].match?(/^(x86_64|i[3-6]86)/)
    end
  end
end

# A formula's version, read as Homebrew reads a tag tarball's: the digits at the end of the url's file name.
class Version
  def initialize(string)
    @string = string
  end

  def to_s
    @string
  end
  alias to_str to_s

  def self.from_url(url)
    stem = File.basename(URI(url).path).sub(/\.(tar\.(gz|bz2|xz|zst)|tgz|zip)$/, "")
    match = stem.match(/(?:^|[-_])v?(\d+(?:\.\d+)+)$/)
    raise ArgumentError, "no version in the url's file name #{stem.inspect}: add a version stanza" if match.nil?

    new(match[1])
  end
end

# One `depends_on` or `uses_from_macos` line: a formula name or a requirement (xcode:, macos:), with its tags.
Dependency = Struct.new(:name, :tags, :stanza, :requirement) do
  def self.parse(stanza, spec, bounds = {})
    if spec.is_a?(Hash) # `uses_from_macos "swift" => :build, since: :sonoma`: the bounds ride in the same hash
      bounds = bounds.merge(spec.slice(:since, :until))
      spec = spec.except(:since, :until)
    end
    raise ArgumentError, "#{stanza} #{spec.inspect}: bounds (since:, until:) are not handled" unless bounds.empty?

    case spec
    when String then new(spec, [], stanza, false)
    when Symbol then new(spec.to_s, [], stanza, true)
    when Hash
      raise ArgumentError, "#{stanza} #{spec.inspect}: one dependency a line" unless spec.size == 1

      name, tags = spec.first
      new(name.to_s, Array(tags), stanza, name.is_a?(Symbol))
    else raise ArgumentError, "#{stanza} #{spec.inspect}: not a dependency"
    end
  end

  def build?
    tags.include?(:build)
  end

  # As it reads in the formula: `depends_on "pkgconf" => :build`, `depends_on xcode: ["16.0", :build]`.
  def to_s
    shown_tags = tags.size == 1 ? tags.first.inspect : tags.inspect
    if requirement
      tags.empty? ? "#{stanza} :#{name}" : "#{stanza} #{name}: #{shown_tags}"
    else
      tags.empty? ? "#{stanza} #{name.inspect}" : "#{stanza} #{name.inspect} => #{shown_tags}"
    end
  end
end

# What a Homebrew dependency is on this Debian machine: a pkg-config module or a command, and the Debian package
# that gives it (scripts/ensure-deps.sh installs them). A dependency missing here fails the check: add it.
DEBIAN_COUNTERPARTS = {
  "curl"      => { pkg_config: "libcurl", deb: "libcurl4-openssl-dev" },
  "libevent"  => { pkg_config: "libevent", deb: "libevent-dev" },
  "nghttp2"   => { pkg_config: "libnghttp2", deb: "libnghttp2-dev" },
  "openssl@3" => { pkg_config: "openssl", deb: "libssl-dev", min_major: 3 },
  "pkgconf"   => { command: "pkg-config", deb: "pkgconf" },
  "swift"     => { command: "swift", deb: "none: a swift.org toolchain on PATH" },
}.freeze
# Requirements only a Mac checks.
MACOS_REQUIREMENTS = %w[macos xcode].freeze
# The libraries an installed ELF file may need (DT_NEEDED) without a declared dependency: glibc's and the C++
# runtime's. Every other one must come from a declared runtime dependency, as `brew linkage` reports.
SYSTEM_LIBRARIES = /^(ld-linux[\w.-]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+)\.so/
LIBRARY_OWNERS = {
  /^lib(ssl|crypto)\.so/             => "openssl@3",
  /^libevent(_\w+)?(-[\d.]+)?\.so/   => "libevent",
  /^libnghttp2\.so/                  => "nghttp2",
  /^libcurl\.so/                     => "curl",
}.freeze

class BuildError < RuntimeError; end

# Homebrew's Formula, as far as a formula's class body, `install` and `test` reach.
class Formula
  include FileUtils # as Homebrew's: mkdir_p, cp, rm_r, ln_sf, … in install and test
  include Minitest::Assertions

  attr_writer :assertions

  def assertions
    @assertions ||= 0
  end

  class << self
    attr_reader :defined

    def inherited(subclass)
      super
      (Formula.instance_variable_get(:@defined) || Formula.instance_variable_set(:@defined, [])) << subclass
      subclass.instance_variable_set(:@stanzas, {})
      subclass.instance_variable_set(:@dependencies, [])
    end

    def stanzas
      @stanzas
    end

    def dependencies
      @dependencies
    end

    %i[desc homepage sha256 license revision version_scheme].each do |stanza|
      define_method(stanza) { |value| @stanzas[stanza] = value }
    end

    def url(value, **options)
      raise ArgumentError, "url #{value.inspect}, #{options}: only a tarball's url is handled" unless options.empty?

      @stanzas[:url] = value
    end

    def version(value)
      @stanzas[:version] = value
    end

    def head(value, **options)
      @stanzas[:head] = [value, options]
    end

    # Recorded, not evaluated: livecheck and bottles need the network and Homebrew's own classes.
    def livecheck(&block)
      @stanzas[:livecheck] = block
    end

    def bottle(&block)
      @stanzas[:bottle] = block
    end

    def depends_on(spec)
      @dependencies << Dependency.parse(:depends_on, spec)
    end

    def uses_from_macos(spec, bounds = {})
      @dependencies << Dependency.parse(:uses_from_macos, spec, bounds)
    end

    # As Homebrew's: `test do … end` becomes the instance method `test`.
    def test(&block)
      define_method(:test, &block)
    end
  end

  attr_reader :name, :path, :testpath, :buildpath

  def initialize(name, path, workdir)
    @name = name
    @path = path
    @workdir = workdir
  end

  def version
    explicit = self.class.stanzas[:version]
    explicit ? Version.new(explicit) : Version.from_url(self.class.stanzas.fetch(:url))
  end

  def prefix
    @workdir/"Cellar"/name/version.to_s
  end

  def bin = prefix/"bin"
  def sbin = prefix/"sbin"
  def lib = prefix/"lib"
  def libexec = prefix/"libexec"
  def include = prefix/"include"
  def share = prefix/"share"
  def pkgshare = prefix/"share"/name
  def doc = share/"doc"/name
  def man = share/"man"
  def man1 = man/"man1"
  def etc = prefix/"etc"
  def bash_completion = prefix/"etc/bash_completion.d"
  def zsh_completion = share/"zsh/site-functions"
  def fish_completion = share/"fish/vendor_completions.d"

  # Homebrew's Formula#generate_completions_from_executable with its default shell_parameter_format: the command
  # with the shell's name appended (`faultline completions bash`), run with SHELL set, written where each shell of
  # a Homebrew prefix looks. Another format is not reached by this formula, so it is refused, not guessed.
  def generate_completions_from_executable(*commands, base_name: name, shells: [:bash, :zsh, :fish],
                                           shell_parameter_format: nil)
    raise ArgumentError, "the shim knows only the default shell_parameter_format" unless shell_parameter_format.nil?

    targets = { bash: bash_completion/base_name, zsh: zsh_completion/"_#{base_name}",
                fish: fish_completion/"#{base_name}.fish" }
    shells.each do |shell|
      line = [*commands.map(&:to_s), shell.to_s]
      ohai line.join(" ")
      output = IO.popen({ "SHELL" => shell.to_s }, line, &:read)
      raise BuildError, "Failed executing: #{line.join(" ")} (#{$CHILD_STATUS})" unless $CHILD_STATUS.success?

      targets.fetch(shell).dirname.mkpath
      targets.fetch(shell).write(output)
    end
  end

  # Homebrew's Formula#system: prints the command, runs it without a shell when it has arguments, and raises when
  # it fails. Its output goes straight to the terminal here (as with `brew install --verbose`), with the time taken.
  def system(cmd, *args)
    line = [cmd, *args].map(&:to_s)
    ohai line.join(" ")
    started = monotonic
    ok = Kernel.system(*line)
    puts format("    (%.1f s)", monotonic - started)
    raise BuildError, "Failed executing: #{line.join(" ")} (#{$CHILD_STATUS})" unless ok
  end

  # Homebrew's shell_output and pipe_output (formula_assertions.rb): the command through a shell, its exit status
  # asserted.
  def shell_output(cmd, result = 0)
    ohai cmd.to_s
    assert_path_exists cmd, "Pathname '#{cmd}' does not exist!" if cmd.is_a?(Pathname)
    output = `#{cmd}`
    assert_equal result, $CHILD_STATUS.exitstatus
    output
  end

  def pipe_output(cmd, input = nil, result = nil)
    ohai cmd.to_s
    output = IO.popen(cmd.to_s, "w+") do |pipe|
      pipe.write(input) unless input.nil?
      pipe.close_write
      pipe.read
    end
    assert_equal result, $CHILD_STATUS.exitstatus unless result.nil?
    output
  end

  # Stands in for a formula without a test block (Kernel#test would be called otherwise).
  def test
    raise BuildError, "#{name} has no test block"
  end

  # `brew install --build-from-source`: stage the url's tarball, run `install` inside it, remove the staging folder.
  def run_install
    staging = @workdir/"tmp"/"#{name}-stage"
    stage(staging) do
      ohai "#{name} #{version}: install, in #{buildpath}"
      install
    end
    FileUtils.rm_rf(staging)
  end

  def run_test
    tmp = @workdir/"tmp"
    tmp.mkpath
    Dir.mktmpdir("#{name}-test-", tmp) do |dir|
      @testpath = Pathname(dir)
      env = {
        "HOME" => dir, "TMPDIR" => tmp.to_s, "TEMP" => tmp.to_s, "TMP" => tmp.to_s, "TERM" => "dumb",
        "XDG_CONFIG_HOME" => "#{dir}/.config", "CURL_HOME" => dir,
        # Homebrew appends HOMEBREW_PREFIX/bin, where the keg is linked; here the keg's own bin.
        "PATH" => "#{ENV.fetch("PATH")}:#{bin}"
      }
      with_env(env) { Dir.chdir(dir) { test } }
    end
  ensure
    @testpath = nil
  end

  private

  def stage(tarball_dir)
    url = self.class.stanzas.fetch(:url)
    uri = URI(url)
    raise BuildError, "#{url}: offline, only a file:// url can be staged (scripts/brew-check.sh writes one)" \
      unless uri.scheme == "file"

    tarball = Pathname(uri.path)
    expected = self.class.stanzas.fetch(:sha256)
    actual = Digest::SHA256.file(tarball).hexdigest
    raise BuildError, "#{tarball}: sha256 #{actual}, the formula says #{expected}" unless actual == expected

    ohai "Verified #{tarball.basename}: sha256 #{actual}"
    FileUtils.rm_rf(tarball_dir)
    tarball_dir.mkpath
    system "tar", "-xzf", tarball, "-C", tarball_dir
    # As Homebrew: a tarball with one top folder is built inside it.
    entries = tarball_dir.children
    @buildpath = entries.size == 1 && entries.first.directory? ? entries.first : tarball_dir
    home = @buildpath/".brew_home"
    home.mkpath
    env = { "HOME" => home.to_s, "XDG_CONFIG_HOME" => "#{home}/.config", "CURL_HOME" => home.to_s,
            "GIT_TERMINAL_PROMPT" => "0" }
    with_env(env) { Dir.chdir(@buildpath) { yield } }
  end

  def with_env(env)
    saved = env.keys.to_h { |key| [key, ENV.fetch(key, nil)] }
    env.each { |key, value| ENV[key] = value }
    yield
  ensure
    saved&.each { |key, value| ENV[key] = value }
  end
end

def load_formula(path, workdir)
  path = Pathname(path).expand_path
  load path.to_s
  defined = Formula.defined || []
  raise "#{path}: expected one Formula subclass, found #{defined.size}" unless defined.size == 1

  name = path.basename(".rb").to_s
  expected_class = name.split(/[-_]/).map(&:capitalize).join
  raise "#{path}: the class is #{defined.first}, not #{expected_class}" if defined.first.name != expected_class

  defined.first.new(name, path, Pathname(workdir || Dir.pwd).expand_path)
end

def check_dependencies(formula)
  ohai "Dependencies"
  formula.class.dependencies.each do |dependency|
    if dependency.requirement && MACOS_REQUIREMENTS.include?(dependency.name)
      puts "  #{dependency}: macOS only, not checked here"
      next
    end
    if dependency.stanza == :uses_from_macos && OS.mac?
      puts "  #{dependency}: macOS provides it"
      next
    end
    counterpart = DEBIAN_COUNTERPARTS[dependency.name]
    raise BuildError, "#{dependency}: no Debian counterpart known to scripts/brew-shim.rb" if counterpart.nil?

    found = if counterpart[:pkg_config]
      version = `pkg-config --modversion #{counterpart[:pkg_config]} 2>/dev/null`.strip
      ok = $CHILD_STATUS.success? && (counterpart[:min_major].nil? || version.to_i >= counterpart[:min_major])
      ok ? "pkg-config #{counterpart[:pkg_config]} #{version}" : nil
    else
      ENV.fetch("PATH").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, counterpart[:command]) }
         .find { |file| File.file?(file) && File.executable?(file) }
    end
    raise BuildError, "#{dependency}: not found here (Debian: #{counterpart[:deb]})" if found.nil?

    puts "  #{dependency}: #{found}"
  end
end

# The `brew linkage` analogue: every library an installed ELF file needs comes from the system or from a declared
# runtime dependency (a build-only dependency is not installed with the formula's bottle).
def check_linkage(formula)
  ohai "Linkage of #{formula.prefix}"
  runtime = formula.class.dependencies.reject(&:build?).map(&:name)
  elves = Dir.glob("#{formula.prefix}/**/*").select do |file|
    File.file?(file) && !File.symlink?(file) && File.binread(file, 4) == "\x7FELF".b
  end
  raise BuildError, "no ELF file installed under #{formula.prefix}" if elves.empty?

  elves.each do |file|
    needed = `readelf -d #{file}`.scan(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/).flatten
    raise BuildError, "readelf -d #{file} failed" unless $CHILD_STATUS.success?

    needed.each do |library|
      if library.match?(SYSTEM_LIBRARIES)
        puts "  #{File.basename(file)}: #{library} (system)"
        next
      end
      owner = LIBRARY_OWNERS.find { |pattern, _| library.match?(pattern) }&.last
      raise BuildError, "#{file} needs #{library}: no rule in scripts/brew-shim.rb names its formula" if owner.nil?
      raise BuildError, "#{file} needs #{library} from #{owner}, not a declared runtime dependency" \
        unless runtime.include?(owner)

      puts "  #{File.basename(file)}: #{library} (#{owner})"
    end
    if (swift = needed.grep(/swift/i)).any?
      raise BuildError, "#{file} needs #{swift.join(", ")}: the Swift runtime is not linked in"
    end
  end
end

def print_tree(root)
  Dir.glob("#{root}/**/*").sort.each do |file|
    next if File.directory?(file)

    puts format("  %-70s %12d bytes", file.delete_prefix("#{root}/"), File.size(file))
  end
end

# The test must stop what it starts: a process it leaves behind would keep `brew test` waiting.
def leftover_children
  Dir.glob("/proc/[0-9]*/stat").filter_map do |stat|
    fields = File.read(stat).sub(/^.*\) /, "").split
    Integer(stat[%r{/proc/(\d+)/}, 1]) if fields[1].to_i == Process.pid
  rescue Errno::ENOENT, Errno::ESRCH
    nil
  end
end

def main(command, formula_path, workdir)
  formula = load_formula(formula_path, workdir)
  stanzas = formula.class.stanzas
  started = monotonic
  case command
  when "info"
    puts "name=#{formula.name}", "version=#{formula.version}", "url=#{stanzas[:url]}", "sha256=#{stanzas[:sha256]}",
         "desc=#{stanzas[:desc]}", "license=#{stanzas[:license]}", "homepage=#{stanzas[:homepage]}"
    formula.class.dependencies.each { |dependency| puts "dependency=#{dependency}" }
  when "install"
    check_dependencies(formula)
    FileUtils.rm_rf(formula.prefix)
    formula.run_install
    ohai "Installed #{formula.prefix}"
    print_tree(formula.prefix)
    check_linkage(formula) if OS.linux?
    ohai format("install: %.1f s", monotonic - started)
  when "test"
    raise BuildError, "#{formula.prefix} is not installed (run install first)" unless formula.prefix.directory?

    begin
      formula.run_test
    ensure
      # Whether it passed or not, nothing it started outlives it; having to stop something fails a passing test.
      left = leftover_children
      left.each { |pid| Process.kill("KILL", pid) }
      puts "brew-shim: killed what the test left running: #{left.join(", ")}" unless left.empty?
    end
    raise BuildError, "the test left processes #{left.join(", ")} running" unless left.empty?

    ohai format("test: %<n>d assertions passed, %<s>.1f s", n: formula.assertions, s: monotonic - started)
  end
end

command, formula_path, workdir = ARGV
unless %w[info install test].include?(command) && formula_path && (command == "info" || workdir)
  abort "usage: ruby #{$PROGRAM_NAME} info FORMULA | install FORMULA WORKDIR | test FORMULA WORKDIR"
end
begin
  main(command, formula_path, workdir)
rescue BuildError, Minitest::Assertion => e
  # A failed step or assertion: its message and where in the formula it failed, not the shim's backtrace.
  where = e.backtrace&.find { |line| line.start_with?(File.expand_path(formula_path)) }
  abort "brew-shim: #{command} failed: #{e.message}#{where ? "\n  at #{where}" : ""}"
end
