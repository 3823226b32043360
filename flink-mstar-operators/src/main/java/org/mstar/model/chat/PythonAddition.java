package org.mstar.model.chat;

import com.hubspot.jinjava.el.ExtendedSyntaxBuilder;
import com.hubspot.jinjava.el.ext.AdditionOperator;
import com.hubspot.jinjava.el.ext.ExtendedParser;
import jinjava.de.odysseus.el.misc.TypeConverter;
import jinjava.de.odysseus.el.tree.impl.Builder.Feature;
import jinjava.de.odysseus.el.tree.impl.Parser;
import jinjava.de.odysseus.el.tree.impl.ast.AstBinary;
import jinjava.de.odysseus.el.tree.impl.ast.AstNode;

/**
 * Jinja's {@code +} refuses an undefined or none operand ({@code messages[0]['content'][0]['text'] + '\n\n'} on a
 * string content raises in jinja2: "'str object' has no attribute 'text'"); Jinjava's adds the text "null" and
 * renders a prompt the model was never trained on. Everything else is Jinjava's addition.
 */
final class PythonAddition extends AdditionOperator {
    static final PythonAddition OP = new PythonAddition();

    @Override
    protected Object apply(TypeConverter converter, Object a, Object b) {
        if (a == null || b == null) {
            throw new UndefinedOperand();
        }
        return super.apply(converter, a, b);
    }

    /** An operand of + that is undefined or none; the renderer adds the template line. */
    static final class UndefinedOperand extends ChatTemplateException {
        UndefinedOperand() {
            super("the chat template cannot be rendered: an operand of + is undefined or none");
        }
    }

    /** Jinjava's expression syntax with this addition in place of its own. */
    static final class SyntaxBuilder extends ExtendedSyntaxBuilder {
        /** The features Jinjava's own factory enables (JUEL's JEE6 profile). */
        SyntaxBuilder() {
            super(Feature.METHOD_INVOCATIONS, Feature.VARARGS);
        }

        @Override
        protected Parser createParser(String expression) {
            return new ExtendedParser(this, expression) {
                @Override
                protected AstBinary createAstBinary(AstNode left, AstNode right, AstBinary.Operator operator) {
                    return super.createAstBinary(left, right, operator == AdditionOperator.OP ? OP : operator);
                }
            };
        }
    }
}
