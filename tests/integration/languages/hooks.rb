# NGINX Unit's ruby hooks: each leaves a file named after its process (and thread) in HOOKS_DIR.
dir = ENV.fetch("HOOKS_DIR")
on_worker_boot { File.write("#{dir}/worker_boot.#{Process.pid}", "") }
on_worker_shutdown { File.write("#{dir}/worker_shutdown.#{Process.pid}", "") }
on_thread_boot do
  File.write("#{dir}/thread_boot.#{Process.pid}.#{Thread.current.object_id}", "")
end
