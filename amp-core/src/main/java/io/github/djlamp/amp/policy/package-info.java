/** What runs in which precision: the compute dtypes and the policy that assigns them to blocks. */
package io.github.djlamp.amp.policy;
