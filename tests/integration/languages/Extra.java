// A class of a java application's "classpath", outside its webapp.
public class Extra {
    public static final String WORDS = "from the classpath";
}
