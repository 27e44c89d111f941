# The seed article's Perl "Hello, Unit!" (a PSGI application), as Starman runs it.
my $app = sub {
    return ["200", ["Content-Type" => "text/plain"], ["Hello, Unit!\n"]];
};
