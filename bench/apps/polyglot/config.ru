# The seed article's Ruby hello, a rack application, as Puma runs it for corral's "ruby" type.
app = Proc.new do |env|
    ["200", {"Content-Type" => "text/plain"}, ["Hello, Ruby on corral!\n"]]
end
run app
