// The seed article's Java hello as a servlet (bench/polyglot.py compiles it into a webapp
// directory), deployed by Jetty for corral's "java" type.
import java.io.IOException;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

public class Hello extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
            throws IOException {
        response.setContentType("text/plain");
        response.getWriter().print("Hello, Java on corral!\n");
    }
}
