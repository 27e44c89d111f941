// A servlet that tells what Jetty and the JVM gave it: a -D option, a class of the classpath.
import java.io.IOException;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

public class Keys extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest request, HttpServletResponse response)
            throws IOException {
        String extra;
        try {
            extra = Class.forName("Extra").getField("WORDS").get(null).toString();
        } catch (ReflectiveOperationException e) {
            extra = "missing";
        }
        response.setContentType("text/plain");
        response.getWriter().print(
            "greeting=" + System.getProperty("greeting") + "\nextra=" + extra + "\n");
    }
}
