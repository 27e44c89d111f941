# The seed article's Ruby "Hello, Unit!" (a rack application), as Puma runs it.
app = Proc.new do |env|
    ["200", {"Content-Type" => "text/plain"}, ["Hello, Unit!\n"]]
end
run app
