# A rack application that takes a fifth of a second per request (tests/integration/
# test_proxy_max_conns.py: requests pile up in front of Puma's threads).
run(Proc.new do |env|
  sleep 0.2
  ["200", {"Content-Type" => "text/plain"}, ["slow\n"]]
end)
