# A PSGI application that tells what Starman gave it: its pid, GREETING, its directory.
use Cwd;
my $app = sub {
    my $body = join("\n", "pid=$$", "greeting=" . ($ENV{GREETING} // ""), "cwd=" . getcwd());
    return ["200", ["Content-Type" => "text/plain"], [$body]];
};
