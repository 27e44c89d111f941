# A rack application that tells what Puma gave it: its pid, GREETING, its directory, threads.
run(proc do |env|
  server = env["puma.config"] ? env["puma.config"].options[:max_threads] : "?"
  body = ["pid=#{Process.pid}", "greeting=#{ENV['GREETING']}", "cwd=#{Dir.pwd}",
          "threads=#{server}"].join("\n")
  ["200", {"Content-Type" => "text/plain"}, [body]]
end)
