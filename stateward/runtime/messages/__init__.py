"""Message correlation (issue 15): publish a message, deliver it to the instances that
wait for it (now, or when they arrive while it lives), start the workflows it starts.

May use the runtime core only.
"""
