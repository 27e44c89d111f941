# The seed article's Perl hello, a PSGI application, as Starman runs it for corral's "perl" type.
my $app = sub {
    return ["200", ["Content-Type" => "text/plain"], ["Hello, Perl on corral!\n"]];
};
